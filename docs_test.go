package sleeplock_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsNameWhatExists keeps the docs true to the tree: README.md, every
// Markdown file under docs/, CONTRIBUTING.md and the package comment of
// every package of the repository may name only repository paths that
// exist and Go identifiers that our packages export. The identifiers are
// read from the source with go/parser, so nothing here is kept by hand.
//
// What it checks:
//   - in Markdown, inline code spans (`...`) and link targets [x](...);
//     fenced code blocks are commands and examples, checked by the
//     examples themselves, so only their Go identifiers are checked;
//   - in package comments, the words that look like repository paths;
//   - a path: something with a separator whose first element is a
//     top-level entry of the repository (`pgstore/sql/release.sql`,
//     `cmd/sleeplock/...`), or a bare file name of our source kinds
//     (`release.sql`), which must exist somewhere in the tree. URLs,
//     absolute paths (/tmp/x), globs and placeholders are not paths;
//   - an identifier: pkg.Name, pkg.Type.Member and Type.Member, where pkg
//     is one of our packages (not main, not a standard-library name) and
//     Type a type of one of them.
func TestDocsNameWhatExists(t *testing.T) {
	root := "."
	idx := indexRepo(t, root)
	var docs []string
	for _, f := range []string{"README.md", "CONTRIBUTING.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			docs = append(docs, f)
		}
	}
	_ = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	})
	var problems []string
	for _, f := range docs {
		problems = append(problems, checkMarkdown(t, idx, f)...)
	}
	for _, pd := range idx.pkgDocs {
		problems = append(problems, checkPackageDoc(idx, pd)...)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d stale references: fix the doc (or the name) so that it names what the code has", len(problems))
	}
}

// repoIndex is what the docs may name.
type repoIndex struct {
	root     string
	top      map[string]bool            // top-level entries of the repository
	base     map[string]bool            // base names of every file
	pkgs     map[string]map[string]bool // package name -> exported top-level names
	members  map[string]map[string]bool // "pkg.Type" -> exported fields and methods
	embeds   map[string][]string        // "pkg.Type" -> embedded "pkg.Type"s
	typePkgs map[string][]string        // exported type name -> packages that declare it
	pkgDocs  []pkgDoc
}

type pkgDoc struct {
	file, dir string
	lines     []docLine
}

type docLine struct {
	n    int
	text string
}

func indexRepo(t *testing.T, root string) *repoIndex {
	t.Helper()
	idx := &repoIndex{
		root: root, top: map[string]bool{}, base: map[string]bool{},
		pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		embeds: map[string][]string{}, typePkgs: map[string][]string{},
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		idx.top[e.Name()] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		idx.base[name] = true
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if f.Doc != nil {
			pd := pkgDoc{file: p, dir: filepath.Dir(p)}
			for _, c := range f.Doc.List {
				n := fset.Position(c.Pos()).Line
				text := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), " ")
				for i, l := range strings.Split(text, "\n") {
					pd.lines = append(pd.lines, docLine{n + i, l})
				}
			}
			idx.pkgDocs = append(idx.pkgDocs, pd)
		}
		if f.Name.Name != "main" {
			idx.addDecls(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A name that is also a standard-library package (errors, context) is
	// not ours to check.
	for pkg := range idx.pkgs {
		if _, err := build.Default.Import(pkg, "", build.FindOnly); err == nil {
			delete(idx.pkgs, pkg)
		}
	}
	return idx
}

func (idx *repoIndex) addDecls(f *ast.File) {
	pkg := f.Name.Name
	names := idx.pkgs[pkg]
	if names == nil {
		names = map[string]bool{}
		idx.pkgs[pkg] = names
	}
	member := func(typ, name string) {
		k := pkg + "." + typ
		if idx.members[k] == nil {
			idx.members[k] = map[string]bool{}
		}
		idx.members[k][name] = true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
			} else if typ := recvType(d.Recv.List[0].Type); typ != "" {
				member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				case *ast.TypeSpec:
					typ := s.Name.Name
					names[typ] = true
					if ast.IsExported(typ) {
						idx.typePkgs[typ] = append(idx.typePkgs[typ], pkg)
					}
					idx.addTypeMembers(pkg, typ, s.Type, member)
				}
			}
		}
	}
}

func (idx *repoIndex) addTypeMembers(pkg, typ string, x ast.Expr, member func(typ, name string)) {
	var fields *ast.FieldList
	switch x := x.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) > 0 {
			for _, n := range fl.Names {
				member(typ, n.Name)
			}
			continue
		}
		// Embedded: its name is a member, and its members are promoted.
		e := fl.Type
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		switch e := e.(type) {
		case *ast.Ident:
			member(typ, e.Name)
			idx.embeds[pkg+"."+typ] = append(idx.embeds[pkg+"."+typ], pkg+"."+e.Name)
		case *ast.SelectorExpr:
			if p, ok := e.X.(*ast.Ident); ok {
				member(typ, e.Sel.Name)
				idx.embeds[pkg+"."+typ] = append(idx.embeds[pkg+"."+typ], p.Name+"."+e.Sel.Name)
			}
		}
	}
}

func recvType(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// hasMember reports whether "pkg.Type" has the field or method name, its
// own or promoted from an embedded type.
func (idx *repoIndex) hasMember(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if idx.members[typ][name] {
		return true
	}
	for _, e := range idx.embeds[typ] {
		if idx.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

var (
	// pkg.Name or pkg.Type.Member; not part of an import path or a file name.
	// A name followed by an ellipsis (store.Check…) is a prefix.
	qualRE = regexp.MustCompile(`(^|[^\w./-])([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?(…|\.\.\.)?`)
	// Type.Member.
	memberRE = regexp.MustCompile(`(^|[^\w./-])([A-Z]\w*)\.([A-Z]\w*)\b`)
	// Words of a package comment that may be paths.
	wordRE = regexp.MustCompile(`[\w./*-]+`)
	spanRE = regexp.MustCompile("`([^`\n]+)`")
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// Source kinds whose bare file names must exist somewhere in the tree.
	srcExt = map[string]bool{".go": true, ".sql": true, ".lua": true}
	// Kinds that make a word a path when it has a separator.
	pathExt = map[string]bool{".go": true, ".sql": true, ".lua": true, ".md": true, ".yml": true, ".yaml": true,
		".sh": true, ".png": true, ".txt": true, ".mod": true, ".sum": true, ".json": true, ".html": true, ".css": true, ".js": true}
)

// checkIdents reports the qualified identifiers of text that the code
// does not have.
func (idx *repoIndex) checkIdents(where, text string) []string {
	var out []string
	for _, m := range qualRE.FindAllStringSubmatch(text, -1) {
		pkg, name, mem := m[2], m[3], m[4]
		names, ok := idx.pkgs[pkg]
		if !ok {
			continue
		}
		if m[5] != "" && mem == "" {
			if !hasPrefix(names, name) {
				out = append(out, fmt.Sprintf("%s: names %s.%s…, but package %s exports no name that starts with %s", where, pkg, name, pkg, name))
			}
			continue
		}
		if !names[name] {
			out = append(out, fmt.Sprintf("%s: names %s.%s, but package %s exports no %s", where, pkg, name, pkg, name))
			continue
		}
		if mem != "" && idx.members[pkg+"."+name] != nil && !idx.hasMember(pkg+"."+name, mem, map[string]bool{}) {
			out = append(out, fmt.Sprintf("%s: names %s.%s.%s, but %s.%s has no field or method %s", where, pkg, name, mem, pkg, name, mem))
		}
	}
	for _, m := range memberRE.FindAllStringSubmatch(text, -1) {
		typ, mem := m[2], m[3]
		pkgs := idx.typePkgs[typ]
		if len(pkgs) == 0 {
			continue
		}
		found := false
		for _, p := range pkgs {
			if idx.hasMember(p+"."+typ, mem, map[string]bool{}) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%s: names %s.%s, but no type %s of ours (in %s) has a field or method %s",
				where, typ, mem, typ, strings.Join(uniq(pkgs), ", "), mem))
		}
	}
	return out
}

func hasPrefix(names map[string]bool, prefix string) bool {
	for n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// pathLike returns the repository path a word names, or "" when the word
// is not a path (a URL, an absolute path, a glob, a placeholder, a lock
// name, prose).
func (idx *repoIndex) pathLike(w string) string {
	w = strings.Trim(w, ".,;:()\"'")
	w = strings.TrimPrefix(w, "./")
	if w == "" || strings.Contains(w, "://") || strings.ContainsAny(w, " *?<>{}[]$~=@:") ||
		strings.HasPrefix(w, "/") || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "../") {
		return ""
	}
	w = strings.TrimSuffix(w, "/...")
	if strings.Contains(w, "...") {
		return ""
	}
	ext := filepath.Ext(w)
	if !strings.Contains(w, "/") {
		if srcExt[ext] && !strings.HasPrefix(w, ".") {
			return w
		}
		return ""
	}
	first := strings.SplitN(w, "/", 2)[0]
	if idx.top[first] || pathExt[ext] && !strings.HasPrefix(first, "github.com") && !strings.Contains(first, ".") {
		return strings.TrimSuffix(w, "/")
	}
	return ""
}

// exists reports whether the path p, named in a file of dir, exists:
// relative to the repository, to dir, or to a module or package of the
// tree that holds dir; a bare file name anywhere in the tree.
func (idx *repoIndex) exists(dir, p string) bool {
	if !strings.Contains(p, "/") && idx.base[p] {
		return true
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, p)); err == nil {
			return true
		}
		if d == "." || d == idx.root || d == "/" {
			break
		}
	}
	_, err := os.Stat(filepath.Join(idx.root, p))
	return err == nil
}

func checkMarkdown(t *testing.T, idx *repoIndex, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	dir := filepath.Dir(file)
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		where := fmt.Sprintf("%s:%d", file, n)
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		out = append(out, idx.checkIdents(where, line)...)
		if fenced {
			continue
		}
		for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
			// A span may be a command or "file: TestName": each word.
			for _, w := range strings.Fields(m[1]) {
				if p := idx.pathLike(w); p != "" && !idx.exists(dir, p) {
					out = append(out, fmt.Sprintf("%s: names the path %q, which does not exist in the repository", where, p))
				}
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
				out = append(out, fmt.Sprintf("%s: links to %q, which does not exist (relative to %s)", where, m[1], dir))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkPackageDoc(idx *repoIndex, pd pkgDoc) []string {
	var out []string
	for _, dl := range pd.lines {
		line := dl.text
		where := fmt.Sprintf("%s:%d (package comment)", pd.file, dl.n)
		out = append(out, idx.checkIdents(where, line)...)
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "  ") {
			continue // a code block of the comment
		}
		for _, w := range wordRE.FindAllString(line, -1) {
			if p := idx.pathLike(w); p != "" && !idx.exists(pd.dir, p) {
				out = append(out, fmt.Sprintf("%s: names the path %q, which does not exist in the repository", where, p))
			}
		}
	}
	return out
}

// TestDocsCheckerCatchesStaleNames proves the checker of
// TestDocsNameWhatExists: it reports a stale path and a stale identifier,
// and leaves alone what is not ours to check.
func TestDocsCheckerCatchesStaleNames(t *testing.T) {
	idx := indexRepo(t, ".")
	stale := []string{
		"`cmd/sleeplock/internal/cli/no_such_test.go`",
		"`pgstore/no_such_dir/...`",
		"`no_such_file.sql`",
		"`sleeplock.NoSuchName`",
		"`sleeplock.Locks.NoSuchMethod`",
		"`Locks.NoSuchMethod`",
		"`store.NoSuch…`",
		"[the doc](no_such_doc.md)",
	}
	for _, line := range stale {
		if got := checkLine(t, idx, line); len(got) != 1 {
			t.Errorf("%s: got %d reports %q, want 1", line, len(got), got)
		}
	}
	fine := []string{
		"`sleeplock.Locks.Acquire`, `Locks.Acquire`, `store.Check…`, `store.Grant.Token` (promoted)",
		"`errors.Is`, `context.Context.Done`, `time.Duration`",
		"`/tmp/lock.db`, `~/x.yaml`, https://example.com/a/b.go, `jobs/*`, `build/linux`",
		"`sleeplock acquire deploy/prod -- make`, `locks.yaml`, `go test ./pgstore/...`",
		"[top](#top), [web](https://go.dev/)",
	}
	for _, line := range fine {
		if got := checkLine(t, idx, line); len(got) != 0 {
			t.Errorf("%s: got reports %q, want none", line, got)
		}
	}
}

func checkLine(t *testing.T, idx *repoIndex, line string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(f, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return checkMarkdown(t, idx, f)
}
