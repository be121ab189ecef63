package sleeplock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sleeplock/sleeplock"
)

// readConfigError reads text and returns its *ConfigError, failing t when
// the text is accepted or the error is of another type.
func readConfigError(t *testing.T, text string) (*sleeplock.ConfigError, error) {
	t.Helper()
	cfg, err := sleeplock.ReadConfig(strings.NewReader(text))
	var ce *sleeplock.ConfigError
	if cfg != nil || !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("%q: got %+v, %v; want a *ConfigError", text, cfg, err)
	}
	return ce, err
}

// Every error about an entry names the entry (index and name) and the line
// of what is wrong; errors outside the entries have Entry -1 and a line.
func TestReadConfigNamesEntryAndLine(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		entry int
		line  int
		want  error // nil: ErrInvalidConfig alone
		text  string
	}{
		{"slots 0", "locks:\n  - name: a\n    slots: 2\n  - name: b\n    slots: 0\n", 1, 5, sleeplock.ErrInvalidSlots, `locks[1] ("b")`},
		{"no name", "locks:\n  - name: a\n    slots: 2\n  - slots: 3\n", 1, 4, sleeplock.ErrInvalidName, "every entry needs a name"},
		{"no slots", "locks:\n  - name: a\n", 0, 2, sleeplock.ErrInvalidSlots, "every entry needs slots"},
		{"declared twice", "locks:\n  - name: a\n    slots: 1\n  - name: a\n    slots: 1\n", 1, 4, sleeplock.ErrAlreadyDefined, "declared again (first at locks[0], line 2)"},
		{"slot", "locks:\n  - name: a\n    slot: 2\n", 0, 3, nil, `unknown key "slot" (did you mean "slots"?)`},
		{"seed's num_slots", "locks:\n  - name: test1\n    num_slots: 2\n", 0, 3, nil, `locks[0] ("test1"): unknown key "num_slots" (did you mean "slots"?)`},
		{"num_slots before name", "locks:\n  - num_slots: 2\n    name: test2\n", 0, 2, nil, `locks[0] ("test2"): unknown key "num_slots"`},
		{"typo", "locks:\n  - nmae: a\n    slots: 1\n", 0, 2, nil, `did you mean "name"?`}, //nolint:misspell // the misspelling is the input
		{"slots two", "locks:\n  - name: a\n    slots: two\n", 0, 3, sleeplock.ErrInvalidSlots, "whole number"},
		{"slots 2.5", "locks:\n  - name: a\n    slots: 2.5\n", 0, 3, sleeplock.ErrInvalidSlots, "not a fraction"},
		{"slots 2.0", "locks:\n  - {name: x, slots: 1}\n  - name: a\n    slots: 2.0\n", 1, 4, sleeplock.ErrInvalidSlots, "not a fraction"},
		{"slots 1e3", "locks:\n  - {name: a, slots: 1e3}\n", 0, 2, sleeplock.ErrInvalidSlots, "whole number"},
		{"slots quoted", "locks:\n  - name: a\n    slots: \"2\"\n", 0, 3, sleeplock.ErrInvalidSlots, "not text"},
		{"slots huge", "locks:\n  - name: a\n    slots: 99999999999999999999999\n", 0, 3, sleeplock.ErrInvalidSlots, "whole number"},
		{"slots too many", "locks:\n  - name: a\n    slots: 1000001\n", 0, 3, sleeplock.ErrInvalidSlots, "1000001"},
		{"slots list", "locks:\n  - name: a\n    slots: [2]\n", 0, 3, sleeplock.ErrInvalidSlots, "a list"},
		{"slots bool", "locks:\n  - name: a\n    slots: true\n", 0, 3, sleeplock.ErrInvalidSlots, "whole number"},
		{"name list", "locks:\n  - name: [a]\n    slots: 1\n", 0, 2, sleeplock.ErrInvalidName, "a name is text"},
		{"name control", "locks:\n  - name: \"a\\x01\"\n    slots: 1\n", 0, 2, sleeplock.ErrInvalidName, "control character"},
		{"key twice", "locks:\n  - name: a\n    slots: 1\n    slots: 2\n", 0, 4, nil, `"slots" is given twice (first at line 3)`},
		{"entry not a mapping", "locks:\n  - a\n", 0, 2, nil, `an entry is a mapping with name and slots`},
		{"custom tag in entry", "locks:\n  - name: a\n    slots: !x 3\n", 0, 3, nil, `unsupported YAML tag "!x"`},
		{"merge key", "base: &b {slots: 1}\nlocks:\n  - <<: *b\n    name: a\n", -1, 1, nil, `unknown key "base"`},
		{"merge key in entry", "locks:\n  - <<: {slots: 1}\n    name: a\n", 0, 2, nil, `merge keys`},
		{"top-level typo", "lock:\n  - name: a\n", -1, 1, nil, `unknown key "lock" (did you mean "locks"?)`},
		{"locks a mapping", "locks:\n  name: a\n  slots: 1\n", -1, 2, nil, "locks must be a list"},
		{"locks a number", "locks: 3\n", -1, 1, nil, "locks must be a list"},
		{"root a list", "- name: a\n  slots: 1\n", -1, 1, nil, `a config is a mapping with the key "locks"`},
		{"two documents", "locks: []\n---\nlocks: []\n", -1, 2, nil, "one YAML document"},
		{"bad YAML", "locks: [\n", -1, 1, nil, "not valid YAML"},
		{"tab", "locks:\n\t- name: a\n", -1, 2, nil, "not valid YAML"},
		// The YAML library says line 1 (its collection's): the line that
		// breaks it is 3 (issue 29 E16).
		{"indentation", "locks:\n  - name: a\n   slots: 2\n", -1, 3, nil, "not valid YAML"},
		{"indentation later", "locks:\n  - name: a\n    slots: 2\n  - name: b\n     slots: 2\n", -1, 5, nil, "not valid YAML"},
		// FuzzReadConfig found this panic in goccy/go-yaml v1.19.2.
		{"custom tag on locks", "locks: !000 0000", -1, 1, nil, `unsupported YAML tag "!000"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ce, err := readConfigError(t, c.yaml)
			if ce.Entry != c.entry || ce.Line != c.line {
				t.Errorf("entry %d line %d, want entry %d line %d (%v)", ce.Entry, ce.Line, c.entry, c.line, err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%v does not match %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("%q does not say %q", err, c.text)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("%q names no line", err)
			}
		})
	}
}

func TestReadConfigGood(t *testing.T) {
	cfg, err := sleeplock.ReadConfig(strings.NewReader("# locks of the app\nlocks:\n  - name: test1\n    slots: 2\n  - name: chat/*\n    slots: 0x10\n  - {name: 2024, slots: 1_000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []sleeplock.LockConfig{{Name: "test1", Slots: 2, Line: 3}, {Name: "chat/*", Slots: 16, Line: 5}, {Name: "2024", Slots: 1000, Line: 7}}
	if len(cfg.Locks) != len(want) {
		t.Fatalf("config %+v", cfg.Locks)
	}
	for i := range want {
		if cfg.Locks[i] != want[i] {
			t.Errorf("locks[%d] = %+v, want %+v", i, cfg.Locks[i], want[i])
		}
	}
	aliased, err := sleeplock.ReadConfig(strings.NewReader("locks:\n  - &one {name: a, slots: 1}\n  - {name: b, slots: 2}\n"))
	if err != nil || len(aliased.Locks) != 2 {
		t.Fatalf("aliased config: %+v %v", aliased, err)
	}
	for _, text := range []string{"", "# nothing yet\n", "locks:\n", "locks: []\n", "---\n", "~\n"} {
		empty, err := sleeplock.ReadConfig(strings.NewReader(text))
		if err != nil || empty == nil || len(empty.Locks) != 0 {
			t.Errorf("%q: %+v %v; want an empty config", text, empty, err)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.yaml")
	if err := os.WriteFile(path, []byte("locks:\n  - name: a\n    num_slots: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sleeplock.LoadConfig(path)
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || ce.File != path || ce.Line != 3 || ce.Entry != 0 ||
		!strings.Contains(err.Error(), path+" line 3: locks[0] (\"a\")") {
		t.Fatalf("LoadConfig = %v (%+v)", err, ce)
	}
	for _, p := range []string{"/nonexistent/locks.yaml", ""} {
		if _, err := sleeplock.LoadConfig(p); !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrInvalidConfig) {
			t.Errorf("LoadConfig(%q) = %v", p, err)
		}
	}
}

// Issue 7 item 9: ReadConfig(nil) and Apply(ctx, nil) panicked.
func TestConfigNilInput(t *testing.T) {
	ctx := context.Background()
	if cfg, err := sleeplock.ReadConfig(nil); cfg != nil || !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("ReadConfig(nil) = %v, %v", cfg, err)
	}
	l := sleeplock.New(nil)
	defer l.Close()
	if _, err := l.Apply(ctx, nil); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("Apply(ctx, nil) = %v", err)
	}
	var none *sleeplock.Locks
	if _, err := none.Apply(ctx, &sleeplock.Config{}); !errors.Is(err, sleeplock.ErrInvalidConfig) {
		t.Fatalf("nil Locks: Apply = %v", err)
	}
	var zero sleeplock.ConfigError
	if zero.Error() == "" || !errors.Is(&zero, sleeplock.ErrInvalidConfig) {
		t.Fatalf("zero ConfigError: %q", zero.Error())
	}
}

// Apply names the entry that the store refused, with its line.
func TestApplyNamesEntry(t *testing.T) {
	ctx := context.Background()
	l := sleeplock.New(nil)
	defer l.Close()
	if err := l.Define(ctx, "b", 5); err != nil {
		t.Fatal(err)
	}
	cfg, err := sleeplock.ReadConfig(strings.NewReader("locks:\n  - name: a\n    slots: 1\n  - name: b\n    slots: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Apply(ctx, cfg)
	var ce *sleeplock.ConfigError
	if !errors.As(err, &ce) || ce.Entry != 1 || ce.Line != 4 || ce.Name != "b" || !errors.Is(err, sleeplock.ErrAlreadyDefined) {
		t.Fatalf("Apply = %v (%+v)", err, ce)
	}
}

// FuzzReadConfig: a config file is user input. Whatever it holds, ReadConfig
// returns a *ConfigError or a config that applies; never a panic. Its seed
// corpus (testdata/fuzz/FuzzReadConfig) keeps every crasher found.
func FuzzReadConfig(f *testing.F) {
	f.Add("locks:\n  - name: a\n    slots: 2\n")
	f.Add("locks: [{name: b, slots: 0}]")
	f.Add("locks:\n  - name: \"\\x01\"\n    slots: 1\n")
	f.Add("- - -")
	f.Add("locks:\n  - name: a\n    num_slots: 2\n")
	f.Add("a: &a [*a]\nlocks: *a\n")
	f.Add("locks:\n  - &e {name: a, slots: 1}\n  - *e\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := sleeplock.ReadConfig(strings.NewReader(text))
		if err != nil {
			var ce *sleeplock.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, sleeplock.ErrInvalidConfig) {
				t.Fatalf("ReadConfig error %v is not a *ConfigError", err)
			}
			if ce.Entry >= 0 && ce.Line <= 0 {
				t.Fatalf("error about locks[%d] names no line: %v", ce.Entry, err)
			}
			return
		}
		seen := map[string]bool{}
		for i, e := range cfg.Locks {
			if e.Line <= 0 || seen[e.Name] {
				t.Fatalf("locks[%d] = %+v: no line, or a name given twice", i, e)
			}
			seen[e.Name] = true
		}
		ctx := context.Background()
		l := sleeplock.New(nil)
		defer l.Close()
		if _, err := l.Apply(ctx, cfg); err != nil {
			t.Fatalf("a config that parsed does not apply: %v", err)
		}
	})
}
