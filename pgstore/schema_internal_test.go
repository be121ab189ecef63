package pgstore

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestMigrationChecksums: every migration is listed in
// migrations/migrations.sum with its checksum, so a released migration is
// never edited (Migrate also refuses a database whose recorded checksum
// differs). A new migration adds its line: cd pgstore/migrations &&
// sha256sum NNN_name.sql >> migrations.sum.
func TestMigrationChecksums(t *testing.T) {
	f, err := os.Open("migrations/migrations.sum")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("migrations.sum: malformed line %q", sc.Text())
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		sum, ok := sums[m.name+".sql"]
		switch {
		case !ok:
			t.Errorf("%s.sql is not in migrations/migrations.sum (add it: sha256sum %s.sql >> migrations.sum)", m.name, m.name)
		case sum != m.checksum:
			t.Errorf("%s.sql was edited after its release (checksum %s, recorded %s): add a new migration instead", m.name, m.checksum, sum)
		}
		delete(sums, m.name+".sql")
	}
	for name := range sums {
		t.Errorf("migrations.sum lists %s, which is not in migrations/", name)
	}
}

// createFunction finds the name of each function a SQL text creates.
var createFunction = regexp.MustCompile(`(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(?:\{\{schema\}\}\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// TestEachFunctionDefinedOnce: across every .sql file of the tree, each
// function is created once (no overloads, no second version of a body),
// and only in sql/, where Migrate applies it; DDL migrations create none.
func TestEachFunctionDefinedOnce(t *testing.T) {
	where := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range createFunction.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			if prev, ok := where[name]; ok {
				t.Errorf("function %s is created twice: in %s and in %s", name, prev, path)
			}
			where[name] = path
			if filepath.Base(filepath.Dir(path)) != "sql" {
				t.Errorf("function %s is created in %s: functions belong in pgstore/sql/", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(where) == 0 {
		t.Fatal("no function found")
	}
}

// TestCallsMatchFunctions: each function the store calls with named
// arguments (calls) is defined in sql/ with those parameters, in that
// order, so its Go argument struct reads like its SQL signature.
func TestCallsMatchFunctions(t *testing.T) {
	defs := map[string][]string{}
	for _, f := range functionFiles {
		text := f.sql
		for {
			loc := createFunction.FindStringSubmatchIndex(text)
			if loc == nil {
				break
			}
			name := text[loc[2]:loc[3]]
			rest := text[loc[1]:]
			end := strings.Index(rest, ")")
			var params []string
			for _, p := range strings.Split(rest[:end], ",") {
				if p = strings.Join(strings.Fields(p), " "); p != "" {
					params = append(params, p)
				}
			}
			defs[name] = params
			text = rest[end:]
		}
	}
	for _, c := range calls {
		got, ok := defs[c.name]
		if !ok {
			t.Errorf("%s() is called but not defined in sql/", c.name)
			continue
		}
		if strings.Join(got, ", ") != strings.Join(c.params, ", ") {
			t.Errorf("%s(): called with (%s), defined with (%s)", c.name, strings.Join(c.params, ", "), strings.Join(got, ", "))
		}
	}
}

// TestQueryNamesAreFunctionNames: a query that calls a function of sql/
// (SELECT f(…), or SELECT … FROM f(…)) calls one, and is named like it in
// camel case (acquireOne calls acquire_one()), so that a reader finds the
// SQL of a Go query by its name.
func TestQueryNamesAreFunctionNames(t *testing.T) {
	defined := map[string]bool{}
	for _, f := range functionFiles {
		for _, m := range createFunction.FindAllStringSubmatch(f.sql, -1) {
			defined[m[1]] = true
		}
	}
	called := regexp.MustCompile(`(?:SELECT|FROM)\s+(?:\*\s+FROM\s+)?"sleeplock"\.([a-z_0-9]+)\(`)
	q := reflect.ValueOf(newQueries("sleeplock"))
	checked := 0
	for i := range q.NumField() {
		field, text := q.Type().Field(i).Name, q.Field(i).String()
		if _, ok := bareStatements[field]; ok {
			continue // queries/: one UPDATE or read of the lock's row
		}
		var fns []string
		for _, m := range called.FindAllStringSubmatch(text, -1) {
			if defined[m[1]] {
				fns = append(fns, m[1])
			}
		}
		if len(fns) == 0 {
			continue
		}
		checked++
		if len(fns) != 1 || !strings.HasPrefix(field, camel(fns[0])) {
			t.Errorf("query %s calls %v: a query calls one function and is named like it (or starts so)", field, fns)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d queries call a function: the pattern no longer matches them", checked)
	}
}

// bareStatements are the queries that send a file of queries/, and its
// variants.
var bareStatements = map[string]struct{}{"acquireFast": {}, "acquireFastEvents": {}, "acquireSlot": {},
	"acquireWeighted": {}, "acquireWeightedEvents": {}, "releaseFast": {}, "releaseFastEvents": {},
	"releaseSlot": {}, "releaseWeighted": {}, "releaseWeightedEvents": {}, "heldOne": {}}

// camel is a SQL name in Go's camel case: acquire_one → acquireOne.
func camel(name string) string {
	parts := strings.Split(name, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// TestFunctionsAreShort: no function of sql/ is longer than 100 lines,
// from its CREATE to the end of its body, so that each can be reviewed.
func TestFunctionsAreShort(t *testing.T) {
	const most = 100
	for _, f := range functionFiles {
		lines := strings.Split(f.sql, "\n")
		for i := 0; i < len(lines); i++ {
			m := createFunction.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			start := i
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), bodyTag+";"); i++ {
			}
			if n := i - start + 1; n > most {
				t.Errorf("%s: %s() is %d lines, more than %d: split it by concern", f.name, m[1], n, most)
			}
		}
	}
}
