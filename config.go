package sleeplock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/sleeplock/sleeplock/store"
)

// Config declares locks to create at start-up (ex_sleeplock's
// `config :ex_sleeplock, locks: [...]`). In YAML:
//
//	locks:
//	  - name: payments
//	    slots: 3
//	  - name: chat/*      # a family: chat/42, chat/43, … one slot each
//	    slots: 1
type Config struct {
	Locks []LockConfig `yaml:"locks"`
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
	Line  int    // 0 when unknown
	Entry int    // index in locks; -1 when the error is not about one entry
	Name  string
	Err   error
}

func (e *ConfigError) Error() string {
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
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

// Unwrap returns ErrInvalidConfig and the entry's error.
func (e *ConfigError) Unwrap() []error { return []error{store.ErrInvalidConfig, e.Err} }

// ReadConfig parses and validates a YAML config. Unknown fields, a missing
// or invalid name or slots, and a name given twice are errors that name the
// entry and its line; nothing is skipped.
func ReadConfig(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ConfigError{Entry: -1, Err: err}
	}
	return parseConfig(data, "")
}

// LoadConfig reads a YAML config file (see ReadConfig).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Entry: -1, Err: err}
	}
	return parseConfig(data, path)
}

func parseConfig(data []byte, file string) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		ce := &ConfigError{File: file, Entry: -1, Err: errors.New(yaml.FormatError(err, false, false))}
		var se yaml.Error
		if errors.As(err, &se) && se.GetToken() != nil {
			ce.Line = se.GetToken().Position.Line
			ce.Err = errors.New(se.GetMessage())
		}
		return nil, ce
	}
	lines := entryLines(data, len(c.Locks))
	seen := make(map[string]int, len(c.Locks))
	for i := range c.Locks {
		e := &c.Locks[i]
		e.Line = lines[i]
		bad := func(err error) error {
			return &ConfigError{File: file, Line: e.Line, Entry: i, Name: e.Name, Err: err}
		}
		if e.Name == "" {
			return nil, bad(store.Invalid(store.ErrInvalidName, `""`, "every entry needs a name"))
		}
		if err := store.CheckDefinition(e.Name, e.Slots); err != nil {
			return nil, bad(err)
		}
		if j, dup := seen[e.Name]; dup {
			return nil, bad(fmt.Errorf("%w: %q is declared again (first at locks[%d])", store.ErrAlreadyDefined, e.Name, j))
		}
		seen[e.Name] = i
	}
	return &c, nil
}

// entryLines finds the line of each entry of locks.
func entryLines(data []byte, n int) []int {
	lines := make([]int, n)
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return lines
	}
	for i := range lines {
		p, err := yaml.PathString("$.locks[" + strconv.Itoa(i) + "]")
		if err != nil {
			continue
		}
		if node, err := p.FilterFile(f); err == nil && node != nil && node.GetToken() != nil {
			lines[i] = node.GetToken().Position.Line
		}
	}
	return lines
}

// Apply defines every lock of c, in order. It stops at the first error,
// which names the entry; entries before it stay defined (Define is
// idempotent, so running Apply again after fixing the file is safe).
func (l *Locks) Apply(ctx context.Context, c *Config) error {
	for i, e := range c.Locks {
		if err := l.Define(ctx, e.Name, e.Slots); err != nil {
			return &ConfigError{Line: e.Line, Entry: i, Name: e.Name, Err: err}
		}
	}
	return nil
}
