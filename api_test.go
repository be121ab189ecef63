package sleeplock_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite api/*.txt from the source")

// apiPackages are the packages whose exported API is listed in api/: the
// directory, from the repository's root, and the file that lists it.
var apiPackages = []struct{ dir, file string }{
	{".", "sleeplock.txt"},
	{"store", "store.txt"},
	{"storetest", "storetest.txt"},
	{"election", "election.txt"},
	{"memstore", "memstore.txt"},
	{"sqlitestore", "sqlitestore.txt"},
	{"pgstore", "pgstore.txt"},
	{"pgstore/pgtest", "pgtest.txt"},
	{"redisstore", "redisstore.txt"},
	{"redisstore/redistest", "redistest.txt"},
	{"turns", "turns.txt"},
	{"otelevents", "otelevents.txt"},
	{"promevents", "promevents.txt"},
}

// TestAPI checks that the exported API of every public package is the one
// listed in api/. A change to the public API must change that listing too,
// so that it is made on purpose: run `go test -run TestAPI -update-api .`
// and commit the new listing with the change.
func TestAPI(t *testing.T) {
	for _, p := range apiPackages {
		t.Run(p.file, func(t *testing.T) {
			got, err := apiOf(p.dir)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("api", p.file)
			if *updateAPI {
				if err := os.MkdirAll("api", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil { //nolint:gosec // a listing in the repository
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run: go test -run TestAPI -update-api .)", err)
			}
			if got != string(want) {
				t.Errorf("the exported API of %s differs from %s (if on purpose, run: go test -run TestAPI -update-api .)\n%s",
					p.dir, path, lineDiff(string(want), got))
			}
		})
	}
}

// apiOf lists the exported API of the package in dir, one sorted line per
// name: constants, variables, functions, types with their exported fields
// and methods.
func apiOf(dir string) (string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var lines []string
	var pkgName string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		if !buildsOnLinux(name) {
			continue
		}
		pkgName = f.Name.Name
		for _, d := range f.Decls {
			lines = append(lines, declAPI(fset, d)...)
		}
	}
	for i := range lines {
		lines[i] = "pkg " + pkgName + ", " + lines[i]
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}

// buildsOnLinux leaves out files for other systems, so that the listing
// does not depend on where it is made.
func buildsOnLinux(name string) bool {
	for _, other := range []string{"_windows.go", "_darwin.go", "_other.go", "_bsd.go"} {
		if strings.HasSuffix(name, other) {
			return false
		}
	}
	return true
}

func declAPI(fset *token.FileSet, d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		sig := strings.TrimPrefix(render(fset, d.Type), "func")
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return []string{"func " + d.Name.Name + sig}
		}
		rt := d.Recv.List[0].Type
		base := rt
		if s, ok := base.(*ast.StarExpr); ok {
			base = s.X
		}
		if ix, ok := base.(*ast.IndexExpr); ok {
			base = ix.X
		}
		if id, ok := base.(*ast.Ident); ok && !id.IsExported() {
			return nil
		}
		return []string{"method (" + render(fset, rt) + ") " + d.Name.Name + sig}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				kind := "var"
				if d.Tok == token.CONST {
					kind = "const"
				}
				for _, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					line := kind + " " + n.Name
					if s.Type != nil {
						line += " " + render(fset, s.Type)
					}
					out = append(out, line)
				}
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				out = append(out, typeAPI(fset, s)...)
			}
		}
	}
	return out
}

func typeAPI(fset *token.FileSet, s *ast.TypeSpec) []string {
	name := s.Name.Name
	if s.TypeParams != nil {
		name += render(fset, s.TypeParams)
	}
	assign := ""
	if s.Assign.IsValid() {
		assign = "= "
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		out := []string{"type " + name + " struct"}
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				out = append(out, "type "+s.Name.Name+" struct, embedded "+render(fset, f.Type))
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, "type "+s.Name.Name+" struct, "+n.Name+" "+render(fset, f.Type))
				}
			}
		}
		return out
	case *ast.InterfaceType:
		out := []string{"type " + name + " interface"}
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				out = append(out, "type "+s.Name.Name+" interface, "+render(fset, m.Type))
				continue
			}
			for _, n := range m.Names {
				if n.IsExported() {
					out = append(out, "type "+s.Name.Name+" interface, "+n.Name+strings.TrimPrefix(render(fset, m.Type), "func"))
				}
			}
		}
		return out
	default:
		return []string{"type " + name + " " + assign + render(fset, s.Type)}
	}
}

func render(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, n); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// lineDiff says which lines one listing has and the other lacks.
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
