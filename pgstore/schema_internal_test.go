package pgstore

import (
	"bufio"
	"os"
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
