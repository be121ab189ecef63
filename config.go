package sleeplock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sleeplock/sleeplock/store"
)

// Config declares locks to create at start-up, each with its slots (Apply
// defines them). In YAML:
//
//	locks:
//	  - name: payments
//	    slots: 3
//	  - name: chat/*      # a family: chat/42, chat/43, … one slot each
//	    slots: 1
type Config struct {
	Locks []LockConfig `yaml:"locks"`
	file  string       // the file it was read from, for Apply's errors
}

// LockConfig is one lock (or family) of a Config.
type LockConfig struct {
	Name  string `yaml:"name"`
	Slots int    `yaml:"slots"`
	// Line is where the entry starts in the file (0 when not read from one).
	Line int `yaml:"-"`
}

// ConfigError is the error of a config that cannot be used: the entry (its
// index from 0, its name and line) and what is wrong with it. It matches
// ErrInvalidConfig and the error of the entry (ErrInvalidSlots, …).
type ConfigError struct {
	File  string // the file's path, when read from one
	Line  int    // the line of what is wrong (a key, a value, an entry); 0 when unknown
	Entry int    // index in locks; -1 when the error is not about one entry
	Name  string // the entry's name, when it has one
	Err   error  // what is wrong
}

func (e *ConfigError) Error() string {
	if e == nil {
		return "sleeplock: invalid config"
	}
	var b strings.Builder
	b.WriteString("sleeplock: invalid config")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		b.WriteString(" line " + strconv.Itoa(e.Line))
	}
	if e.Entry >= 0 {
		fmt.Fprintf(&b, ": locks[%d]", e.Entry)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%q)", e.Name)
		}
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns ErrInvalidConfig and the entry's error.
func (e *ConfigError) Unwrap() []error {
	if e == nil || e.Err == nil {
		return []error{store.ErrInvalidConfig}
	}
	return []error{store.ErrInvalidConfig, e.Err}
}

// ReadConfig parses and validates a YAML config. Unknown keys, a missing or
// invalid name or slots (slots must be a whole number: 2.5 is refused, not
// rounded), a value of the wrong type, a name given twice, YAML tags other
// than the standard ones and more than one document are errors that name
// the entry and the line; nothing is skipped. An empty file is a config
// with no locks.
func ReadConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, &ConfigError{Entry: -1, Err: errors.New("ReadConfig needs an io.Reader, got nil")}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ConfigError{Entry: -1, Err: err}
	}
	return parseConfig(data, "")
}

// LoadConfig reads a YAML config file (see ReadConfig).
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, &ConfigError{Entry: -1, Err: errors.New("LoadConfig needs a file name, got \"\"")}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Entry: -1, Err: err}
	}
	return parseConfig(data, path)
}

// parseConfig reads data.
func parseConfig(data []byte, file string) (*Config, error) {
	return contained(file, func() (*Config, error) {
		p := configParser{file: file}
		c, err := p.parse(data)
		if c != nil {
			c.file = file
		}
		return c, err
	})
}

// contained runs read, stopping a panic there as a *ConfigError: the YAML
// library's parser is not ours, and a config file is user input.
func contained(file string, read func() (*Config, error)) (c *Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg := clip(fmt.Sprint(r))
			c, err = nil, &ConfigError{File: file, Entry: -1, Err: fmt.Errorf("the YAML reader failed on this input: %s", msg)}
		}
	}()
	return read()
}

// configParser walks the YAML node tree, so that every error can name the
// entry and the line of what is wrong.
type configParser struct {
	file  string
	entry int    // the entry being read; -1 outside locks
	name  string // its name, once known
}

func (p *configParser) fail(n *yaml.Node, format string, args ...any) error {
	return p.failErr(n, fmt.Errorf(format, args...))
}

func (p *configParser) failErr(n *yaml.Node, err error) error {
	ce := &ConfigError{File: p.file, Entry: p.entry, Name: p.name, Err: err}
	if n != nil {
		ce.Line = n.Line
	}
	return ce
}

// yamlLine finds the line in the YAML library's error text ("yaml: line 3: …").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

func (p *configParser) parse(data []byte) (*Config, error) {
	p.entry = -1
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, nil
		}
		return nil, p.syntax(err, data)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, p.syntax(err, data)
	default:
		return nil, p.fail(&more, "a config is one YAML document; found another (remove the second \"---\")")
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return &Config{}, nil
		}
		root = doc.Content[0]
	}
	root, err := p.deref(root)
	if err != nil {
		return nil, err
	}
	if isNull(root) {
		return &Config{}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.fail(root, "a config is a mapping with the key \"locks\", not %s", describe(root))
	}
	c := &Config{}
	var locks *yaml.Node
	err = p.eachKey(root, []string{"locks"}, func(key string, v *yaml.Node) error {
		locks = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if locks == nil || isNull(locks) {
		return c, nil
	}
	if locks.Kind != yaml.SequenceNode {
		return nil, p.fail(locks, "locks must be a list of entries with name and slots (each starting with \"- \"), not %s", describe(locks))
	}
	seen := make(map[string]int, len(locks.Content))
	for i, n := range locks.Content {
		p.entry, p.name = i, ""
		e, err := p.lock(n)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[e.Name]; dup {
			return nil, p.failErr(n, fmt.Errorf("%w: %q is declared again (first at locks[%d], line %d)", store.ErrAlreadyDefined, e.Name, j, c.Locks[j].Line))
		}
		seen[e.Name] = i
		c.Locks = append(c.Locks, e)
	}
	return c, nil
}

// lock reads one entry of locks.
func (p *configParser) lock(n *yaml.Node) (LockConfig, error) {
	n, err := p.deref(n)
	if err != nil {
		return LockConfig{}, err
	}
	if n.Kind != yaml.MappingNode {
		return LockConfig{}, p.fail(n, "an entry is a mapping with name and slots (\"- name: payments\" and \"  slots: 3\" below it), not %s", describe(n))
	}
	e := LockConfig{Line: n.Line}
	// Find the name first, so that every later error can say it.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "name" {
			if v, err := p.deref(n.Content[i+1]); err == nil && v.Kind == yaml.ScalarNode && !isNull(v) {
				p.name = v.Value
			}
			break
		}
	}
	var nameNode, slotsNode *yaml.Node
	err = p.eachKey(n, []string{"name", "slots"}, func(key string, v *yaml.Node) error {
		if key == "name" {
			nameNode = v
		} else {
			slotsNode = v
		}
		return nil
	})
	if err != nil {
		return LockConfig{}, err
	}
	if nameNode == nil || isNull(nameNode) {
		at := nameNode
		if at == nil {
			at = n
		}
		return LockConfig{}, p.failErr(at, store.Invalid(store.ErrInvalidName, `""`, "every entry needs a name"))
	}
	if nameNode.Kind != yaml.ScalarNode {
		return LockConfig{}, p.failErr(nameNode, store.Invalid(store.ErrInvalidName, describe(nameNode), "a name is text"))
	}
	e.Name = nameNode.Value
	if slotsNode == nil || isNull(slotsNode) {
		at := slotsNode
		if at == nil {
			at = n
		}
		return LockConfig{}, p.failErr(at, store.Invalid(store.ErrInvalidSlots, "(missing)", "every entry needs slots, a whole number from 1 to "+strconv.Itoa(store.MaxSlots)))
	}
	slots, err := p.slots(slotsNode)
	if err != nil {
		return LockConfig{}, err
	}
	e.Slots = slots
	if err := store.CheckDefinition(e.Name, e.Slots); err != nil {
		at := slotsNode
		if errors.Is(err, store.ErrInvalidName) {
			at = nameNode
		}
		return LockConfig{}, p.failErr(at, err)
	}
	return e, nil
}

// slots reads a number of slots: a YAML integer, nothing else.
func (p *configParser) slots(n *yaml.Node) (int, error) {
	rule := "slots must be a whole number from 1 to " + strconv.Itoa(store.MaxSlots)
	if n.Kind != yaml.ScalarNode {
		return 0, p.failErr(n, store.Invalid(store.ErrInvalidSlots, describe(n), rule))
	}
	value := strconv.Quote(clip(n.Value))
	switch n.ShortTag() {
	case "!!int":
	case "!!float":
		return 0, p.failErr(n, store.Invalid(store.ErrInvalidSlots, value, rule+" (not a fraction; write 2, not 2.0 or 2.5)"))
	case "!!str":
		return 0, p.failErr(n, store.Invalid(store.ErrInvalidSlots, value, rule+", not text"))
	default:
		return 0, p.failErr(n, store.Invalid(store.ErrInvalidSlots, value, rule+", not "+describe(n)))
	}
	var v int64
	if err := n.Decode(&v); err != nil || v != int64(int(v)) {
		return 0, p.failErr(n, store.Invalid(store.ErrInvalidSlots, value, rule))
	}
	return int(v), nil // CheckDefinition checks the range
}

// eachKey calls f for each key of mapping n, which must be one of known and
// must appear once.
func (p *configParser) eachKey(n *yaml.Node, known []string, f func(key string, v *yaml.Node) error) error {
	if len(n.Content)%2 != 0 {
		return p.fail(n, "a mapping with a key and no value")
	}
	line := make(map[string]int, len(known))
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i]; k.ShortTag() == "!!merge" {
			return p.fail(k, "merge keys (\"<<\") are not supported: write %s in full", quoteAll(known))
		}
		k, err := p.deref(n.Content[i])
		if err != nil {
			return err
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			return p.fail(k, "a key must be a word (%s), not %s", quoteAll(known), describe(k))
		}
		key := k.Value
		if !contains(known, key) {
			msg := fmt.Sprintf("unknown key %q", clip(key))
			if s := suggest(key, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			if p.entry < 0 {
				return p.fail(k, "%s; the only key of the top level is %s", msg, quoteAll(known))
			}
			return p.fail(k, "%s; the keys of an entry are %s", msg, quoteAll(known))
		}
		if first, dup := line[key]; dup {
			return p.fail(k, "%q is given twice (first at line %d)", key, first)
		}
		line[key] = k.Line
		v, err := p.deref(n.Content[i+1])
		if err != nil {
			return err
		}
		if err := f(key, v); err != nil {
			return err
		}
	}
	return nil
}

// deref follows aliases and refuses tags that are not YAML's standard ones:
// a custom tag ("!x") has no meaning in a config, and a silent guess would
// hide a typo.
func (p *configParser) deref(n *yaml.Node) (*yaml.Node, error) {
	for range 100 {
		if n == nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, nil
		}
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil {
				return nil, p.fail(n, "an alias (*%s) with no anchor", clip(n.Value))
			}
			n = n.Alias
			continue
		}
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq", "!!timestamp":
			return n, nil
		}
		return nil, p.fail(n, "unsupported YAML tag %q", clip(n.Tag))
	}
	return nil, p.fail(n, "aliases nested too deep")
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names the kind of a node for an error: "a list", "the text \"x\"".
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "nothing"
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		return "the text " + strconv.Quote(clip(n.Value))
	case n.Kind == yaml.ScalarNode:
		return strconv.Quote(clip(n.Value))
	}
	return "an unexpected YAML node"
}

// syntax reports an error of the YAML library (bad YAML in data) with its
// line: the later of the library's and brokenLine's.
func (p *configParser) syntax(err error, data []byte) error {
	msg := err.Error()
	ce := &ConfigError{File: p.file, Entry: -1}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		ce.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	ce.Line = max(ce.Line, brokenLine(data))
	ce.Err = errors.New("not valid YAML: " + strings.TrimPrefix(msg, "yaml: "))
	return ce
}

// maxBrokenLines bounds the lines brokenLine reads: a config is a few
// dozen lines; a larger file keeps the library's line.
const maxBrokenLines = 500

// brokenLine returns the line from which data stops being YAML: the
// first line k such that lines 1..k-1 parse and no longer prefix does (0
// when unknown). The YAML library reports some errors at the line of the
// collection they are in, not of the line that breaks it ("did not find
// expected '-' indicator" on line 1 for a key mis-indented on line 3).
func brokenLine(data []byte) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxBrokenLines {
		return 0
	}
	good := 0 // the longest prefix, in lines, that parses
	for k := len(lines) - 1; k >= 0; k-- {
		var n yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) == nil {
			good = k
			break
		}
	}
	if good >= len(lines) {
		return 0
	}
	return good + 1
}

// suggest returns the known key that key is most likely a typo of, or "".
func suggest(key string, known []string) string {
	k := strings.ToLower(key)
	for _, w := range known {
		if strings.Contains(k, w) || (len(k) >= 3 && strings.Contains(w, k)) {
			return w // num_slots → slots, lock → locks
		}
	}
	best, bestD := "", 3
	for _, w := range known {
		if d := editDistance(k, w); d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short keys.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " and ")
}

// clip shortens s for an error message, at a rune boundary.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	i := 40
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Apply defines every lock of c, all or nothing, in one transaction of
// the store: when an entry cannot be defined (invalid, or a name defined
// already with other slots) nothing changes, and the error is a
// *ConfigError naming the entry, its line and the file it was read from
// (LoadConfig). The same definition again is a no-op, so Apply may run at
// every start-up. With AllowResize, a lock or family defined with other
// slots is resized instead (holders keep their slots, waiters are granted
// what became free). With Prune (or PruneInUse), every lock and family the
// config does not name is deleted as Delete deletes it: one in use is
// refused with an *InUseError (wrapped in a *ConfigError naming the lock
// and the file, as a pruned lock has no line) and nothing changes, unless
// PruneInUse. Applied reports what changed.
func (l *Locks) Apply(ctx context.Context, c *Config, opts ...ApplyOption) (Applied, error) {
	if err := l.usable(ctx); err != nil {
		return Applied{}, err
	}
	if c == nil {
		return Applied{}, &ConfigError{Entry: -1, Err: errors.New("Apply needs a *Config, got nil")}
	}
	var ac applyConfig
	for _, o := range opts {
		if o != nil {
			o(&ac)
		}
	}
	defs := make([]store.Definition, len(c.Locks))
	for i, e := range c.Locks {
		if err := store.CheckDefinition(e.Name, e.Slots); err != nil {
			return Applied{}, &ConfigError{File: c.file, Line: e.Line, Entry: i, Name: e.Name, Err: err}
		}
		defs[i] = store.Definition{Name: e.Name, Slots: e.Slots}
	}
	r, err := l.store.Reconcile(ctx, defs, ac.opts, l.emitter)
	if err != nil {
		ce := &ConfigError{File: c.file, Entry: -1, Err: err}
		var conflict *store.ConflictError
		var inUse *store.InUseError
		switch {
		case errors.As(err, &conflict):
			for i, e := range c.Locks {
				if e.Name == conflict.Name && e.Slots == conflict.Requested {
					ce.Line, ce.Entry, ce.Name = e.Line, i, e.Name
					break
				}
			}
		case errors.As(err, &inUse):
			ce.Name = inUse.Lock // pruned: no entry, no line
			ce.Err = fmt.Errorf("prune: %w", err)
		}
		return Applied{}, ce
	}
	return r, nil
}
