package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// Global flags may come before the command; the top-level help lists them.
func TestGlobalFlags(t *testing.T) {
	e := newRunEnv(t)
	if out, errOut, code := run(t, "--store", e.store(), "define", "g", "2"); code != 0 || out != "g has 2 slots\n" {
		t.Fatalf("--store before define: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := run(t, "--store="+e.store(), "state", "g"); code != 0 || !strings.Contains(out, "g ") {
		t.Fatalf("--store= before state: exit %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"--store"}, {"--store", e.store()}, {"--store", e.store(), "demo"}, {"--nope", "state"}} {
		if _, errOut, code := run(t, args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d %q; want 2 and a message", args, code, errOut)
		}
	}
	out, _, _ := run(t, "help")
	for _, want := range []string{"--store STORE", "SLEEPLOCK_STORE", "--schema"} {
		if !strings.Contains(out, want) {
			t.Errorf("help does not mention %s:\n%s", want, out)
		}
	}
}

// help spells flags as README does (--name, -n for one letter); help
// help, --version and version work; help run lists the exit statuses and
// the command's environment; help apply shows the config format.
func TestHelpAsREADME(t *testing.T) {
	for name := range commands {
		out, _, code := run(t, "help", name)
		if code != 0 {
			t.Fatalf("help %s: exit %d", name, code)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  -") && !strings.HasPrefix(l, "  --") && len(strings.Fields(l)[0]) > 2 {
				t.Errorf("help %s: single-dash long flag %q", name, l)
			}
		}
	}
	if out, _, _ := run(t, "help", "state"); !strings.Contains(out, "  --json\n") {
		t.Errorf("help state:\n%s", out)
	}
	if out, errOut, code := run(t, "help", "help"); code != 0 || !strings.HasPrefix(out, "usage: sleeplock help [COMMAND]") {
		t.Errorf("help help: exit %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"--version"}, {"version"}, {"-V"}} {
		if out, errOut, code := run(t, args...); code != 0 || !strings.HasPrefix(out, "sleeplock 0.2.0 ") {
			t.Errorf("%q: exit %d %q %q", args, code, out, errOut)
		}
	}
	out, _, _ := run(t, "help", "run")
	for _, want := range []string{"Exit status", "124", "125", "127", "SLEEPLOCK_TOKEN", "SLEEPLOCK_REF", "--conflict-exit-code E, -E E", "--wait DUR, --timeout DUR, -w DUR"} {
		if !strings.Contains(out, want) {
			t.Errorf("help run does not say %q:\n%s", want, out)
		}
	}
	out, _, _ = run(t, "help", "apply")
	for _, want := range []string{"locks:", "- name: payments", "slots: 3", "chat/*"} {
		if !strings.Contains(out, want) {
			t.Errorf("help apply does not show %q:\n%s", want, out)
		}
	}
	out, _, _ = run(t, "help", "serve")
	if !strings.Contains(out, "SLEEPLOCK_SERVE_TOKEN") || strings.Contains(out, "$SLEEPLOCK_TOKEN") {
		t.Errorf("help serve:\n%s", out)
	}
}

// version prints 0.2.0 and, when built from a clone, the commit.
func TestVersionLine(t *testing.T) {
	if got := versionLine(nil); !strings.HasPrefix(got, "sleeplock 0.2.0 go") {
		t.Errorf("no build info: %q", got)
	}
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.2.0 (commit 0123abcd+modified) go") {
		t.Errorf("from a clone: %q", got)
	}
	bi.Settings[1].Value = "false"
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.2.0 (commit 0123abcd) go") {
		t.Errorf("from a clean clone: %q", got)
	}
	bi = &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.3.1 go") {
		t.Errorf("installed from a published version: %q", got)
	}
	bi.Main.Version = "v0.0.0-20260101000000-0123abcd0123+dirty"
	if got := versionLine(bi); !strings.HasPrefix(got, "sleeplock 0.2.0 (commit 0123abcd0123) go") {
		t.Errorf("built from a commit: %q", got)
	}
}

// Errors are told in the command line's terms, once: no doubled prefix, no
// hint meant for the library's callers.
func TestErrorsInCLITerms(t *testing.T) {
	e := newRunEnv(t)
	if _, errOut, code := run(t, "define", "--store", e.store(), "payments", "2"); code != 0 {
		t.Fatal(errOut)
	}
	if out, errOut, code := run(t, "define", "--store", e.store(), "one", "1"); code != 0 || out != "one has 1 slot\n" {
		t.Fatalf("define one 1: exit %d %q %q", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"define", "payments", "4"}, 1, "sleeplock define: lock \"payments\" has 2 slots, not 4: give --resize to change them\n"},
		{[]string{"state", "nolock"}, 1, "sleeplock state: no lock \"nolock\": define it with \"sleeplock define nolock SLOTS\" (a family NAME/* covers every NAME/…)\n"},
		{[]string{"release", "--ref", "r", "nolock"}, 1, "sleeplock release: no lock \"nolock\": define it with \"sleeplock define nolock SLOTS\" (a family NAME/* covers every NAME/…): nothing released\n"},
		{[]string{"run", "--slots", "3", "payments", "true"}, 125, "sleeplock run: lock \"payments\" has 2 slots, not 3: drop --slots, or resize it with \"sleeplock define payments 3 --resize\"\n"},
	} {
		_, errOut, code := run(t, append(c.args[:1:1], append([]string{"--store", e.store()}, c.args[1:]...)...)...)
		if code != c.code || errOut != c.want {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// serve's bearer token is SLEEPLOCK_SERVE_TOKEN: the fencing token that
// sleeplock run gives its command (SLEEPLOCK_TOKEN) is never taken for it.
func TestServeTokenIsNotTheFencingToken(t *testing.T) {
	newRunEnv(t)
	t.Setenv("SLEEPLOCK_SERVE_TOKEN", "")
	t.Setenv("SLEEPLOCK_TOKEN", "12345678901234567890")
	// An ended context: were the token taken, serve would stop at once
	// instead of serving.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut strings.Builder
	if code := Main(ctx, []string{"serve", "--allow-release", "--addr", "127.0.0.1:0"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "SLEEPLOCK_SERVE_TOKEN") {
		t.Errorf("exit %d %q; want 2 asking for SLEEPLOCK_SERVE_TOKEN", code, errOut.String())
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := serveToken(true, file, ""); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("--token-file: %q %v", tok, err)
	}
}

// serve prints the address it was given (0.0.0.0, not [::]) with the port
// it listens on.
func TestServeShownAddr(t *testing.T) {
	for _, c := range []struct {
		given string
		got   net.Addr
		want  string
	}{
		{"0.0.0.0:7070", &net.TCPAddr{IP: net.IPv6unspecified, Port: 7070}, "0.0.0.0:7070"},
		{"0.0.0.0:0", &net.TCPAddr{IP: net.IPv6unspecified, Port: 41234}, "0.0.0.0:41234"},
		{"localhost:7070", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}, "localhost:7070"},
		{":7070", &net.TCPAddr{IP: net.IPv6unspecified, Port: 7070}, "[::]:7070"},
	} {
		if got := shownAddr(c.given, c.got); got != c.want {
			t.Errorf("%s listening on %v: shown %q, want %q", c.given, c.got, got, c.want)
		}
	}
}

// The synopsis of README's "Command line" (and docs/cli.md's) names every
// flag of each command but the store's, by one of its names: a new user
// reading it found no --stats for state (issue 42, tried again). And help
// names every flag's value by what it is (REF, ADDR, N), never by its Go
// type ("--ref string").
func TestSynopsisNamesEveryFlag(t *testing.T) {
	for _, doc := range []string{"../../../../README.md", "../../../../docs/cli.md"} {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, block, ok := strings.Cut(string(md), "sleeplock [--store STORE] COMMAND [flags] [ARGS…]\n")
		block, _, _ = strings.Cut(block, "```")
		if !ok || block == "" {
			t.Fatalf("%s: no synopsis block", doc)
		}
		lines := map[string]string{} // command → its synopsis lines
		for _, l := range strings.Split(block, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "sleeplock" {
				lines[f[1]] += " " + l + " "
			}
		}
		for name := range commands {
			syn, ok := lines[name]
			if !ok {
				continue // version, help and the rest without flags of their own
			}
			out, _, _ := run(t, "help", name)
			for _, l := range strings.Split(out, "\n") {
				if !strings.HasPrefix(l, "  -") {
					continue
				}
				var names []string
				for _, n := range strings.Split(strings.TrimSpace(l), ", ") {
					flag, placeholder, _ := strings.Cut(n, " ")
					switch placeholder {
					case "string", "int", "uint", "float", "value", "int64", "float64":
						t.Errorf("help %s: %q names its value by its Go type", name, n)
					}
					names = append(names, flag)
				}
				if slices.ContainsFunc(names, func(n string) bool { return n == "--store" || n == "--schema" || n == "--prefix" }) {
					continue
				}
				if !slices.ContainsFunc(names, func(n string) bool {
					return regexp.MustCompile(`[\[ |]` + regexp.QuoteMeta(n) + `[\] |]`).MatchString(syn)
				}) {
					t.Errorf("%s: the synopsis of %s names none of %v", doc, name, names)
				}
			}
		}
	}
}
