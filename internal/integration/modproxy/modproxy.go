// Package modproxy reads the repository's list of modules
// (scripts/modules) and writes a Go module proxy of the released ones, at
// their declared versions, in the layout of a file GOPROXY: for each
// module, @v/list and, for its version, .info, .mod and a .zip made by
// golang.org/x/mod/zip from the checkout's files (those git tracks, and
// those it does not ignore, as they are in the working tree). Git tags
// play no part: a clone without them gives the same proxy.
//
// scripts/release uses it (through cmd/modproxy) to tidy the modules
// before their versions are published, and the release test to fetch
// every module as a stranger does.
package modproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// ListFile is the list of modules, from the repository's root.
const ListFile = "scripts/modules"

// Module is one line of the list.
type Module struct {
	Dir     string // from the repository's root, slash-separated ("." for the root)
	Path    string // the module path of its go.mod
	Version string // the version of its next release; "" when it is never released
}

// Released reports whether the module is published.
func (m Module) Released() bool { return m.Version != "" }

// Tag is the git tag of the module's version: "v0.2.0" for the root,
// "pgstore/v0.2.0" for a module in a subdirectory.
func (m Module) Tag() string {
	if m.Dir == "." {
		return m.Version
	}
	return m.Dir + "/" + m.Version
}

// Modules reads the list of the repository at root, in its order.
func Modules(root string) ([]Module, error) {
	f, err := os.Open(filepath.Join(root, ListFile))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var mods []Module
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want a directory and a version (or -), got %q", ListFile, n, line)
		}
		m := Module{Dir: path.Clean(fields[0])}
		if fields[1] != "-" {
			if !semver.IsValid(fields[1]) || semver.Canonical(fields[1]) != fields[1] {
				return nil, fmt.Errorf("%s:%d: %q is not a canonical semantic version", ListFile, n, fields[1])
			}
			m.Version = fields[1]
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", ListFile, n, err)
		}
		m.Path = modfile.ModulePath(data)
		if m.Path == "" {
			return nil, fmt.Errorf("%s:%d: %s/go.mod names no module", ListFile, n, m.Dir)
		}
		mods = append(mods, m)
	}
	return mods, sc.Err()
}

// Build writes the proxy of the released modules of the repository at
// root into dir, and returns the modules it wrote.
func Build(root, dir string) ([]Module, error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	files, err := checkoutFiles(root)
	if err != nil {
		return nil, err
	}
	var out []Module
	for _, m := range mods {
		if !m.Released() {
			continue
		}
		if err := write(root, dir, m, files); err != nil {
			return nil, fmt.Errorf("%s@%s: %w", m.Path, m.Version, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// write puts module m's version into the proxy at dir.
func write(root, dir string, m Module, files []string) error {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	v := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		return err
	}
	src := filepath.Join(root, filepath.FromSlash(m.Dir))
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	var z bytes.Buffer
	if err := zip.Create(&z, module.Version{Path: m.Path, Version: m.Version}, moduleFiles(root, m.Dir, files)); err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": info,
		m.Version + ".mod":  gomod,
		m.Version + ".zip":  z.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(v, name), data, 0o644); err != nil { //nolint:gosec // a proxy anyone may read
			return err
		}
	}
	return nil
}

// checkoutFiles lists the files of the checkout at root, slash-separated
// from root: those git tracks and those it does not ignore, as they are in
// the working tree (a deleted one is left out). Outside a git checkout it
// is every file.
func checkoutFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var all []string
		werr := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			all = append(all, filepath.ToSlash(rel))
			return err
		})
		return all, werr
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			files = append(files, f)
		}
	}
	return files, nil
}

// moduleFiles are the files below dir, named from dir; zip.Create leaves
// out those of nested modules.
func moduleFiles(root, dir string, files []string) []zip.File {
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var out []zip.File
	for _, f := range files {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		out = append(out, file{name: strings.TrimPrefix(f, prefix), path: filepath.Join(root, filepath.FromSlash(f))})
	}
	return out
}

// file is a file of the checkout as zip.Create reads it.
type file struct{ name, path string }

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (os.FileInfo, error)  { return os.Lstat(f.path) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// WorkFile is the go.work of the repository at root, made from the list:
// every module used, and each released version replaced by its directory.
// The go command reads the go.mod of every version a module requires,
// even of a module of the workspace; until a version is published, only
// such a line lets the checkout build. It is in go.work alone: no module
// carries a replace, and their users never read go.work.
func WorkFile(root string) (string, error) {
	mods, err := Modules(root)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax("go.mod", data, nil)
	if err != nil {
		return "", err
	}
	if f.Go == nil {
		return "", errors.New("go.mod has no go line")
	}
	dirs := make([]string, 0, len(mods))
	for _, m := range mods {
		dirs = append(dirs, workDir(m.Dir))
	}
	slices.Sort(dirs)
	var b strings.Builder
	b.WriteString("// Written by `scripts/release work` from scripts/modules: edit that\n// file, not this one (RELEASING.md).\n\n")
	fmt.Fprintf(&b, "go %s\n\nuse (\n", f.Go.Version)
	for _, d := range dirs {
		fmt.Fprintf(&b, "\t%s\n", d)
	}
	b.WriteString(")\n\n// The go command reads the go.mod of each version a module requires, even\n" +
		"// of a module of this workspace: until these versions are published,\n" +
		"// these lines point them at the checkout. No go.mod has a replace.\nreplace (\n")
	for _, m := range mods {
		if m.Released() {
			fmt.Fprintf(&b, "\t%s %s => %s\n", m.Path, m.Version, workDir(m.Dir))
		}
	}
	b.WriteString(")\n")
	return b.String(), nil
}

func workDir(dir string) string {
	if dir == "." {
		return "."
	}
	return "./" + dir
}
