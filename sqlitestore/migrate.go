package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

// SchemaVersion is the schema version this build uses.
const SchemaVersion = 1

//go:embed migrations/*.sql
var migrationFiles embed.FS

// SchemaError reports a database whose schema this build cannot use.
type SchemaError struct {
	Path string
	Have int // the database's schema version
	Want int // SchemaVersion
}

func (e *SchemaError) Error() string {
	if e == nil {
		return "sqlitestore: schema error"
	}
	if e.Have > e.Want {
		return fmt.Sprintf("sqlitestore: %s has schema version %d, newer than this build's %d: use a newer sleeplock (or another file)",
			e.Path, e.Have, e.Want)
	}
	return fmt.Sprintf("sqlitestore: %s has schema version %d, want %d: open it without WithoutMigrate (or run sleeplock migrate)",
		e.Path, e.Have, e.Want)
}

// Unwrap returns ErrSchemaTooNew for a newer schema, and
// store.ErrInvalidConfig.
func (e *SchemaError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.Have > e.Want {
		return []error{ErrSchemaTooNew, store.ErrInvalidConfig}
	}
	return []error{store.ErrInvalidConfig}
}

// Migrate creates or upgrades the schema of the database at path and
// returns its version. Open does the same; Migrate is for tools that only
// set up.
func Migrate(ctx context.Context, path string) (int, error) {
	s, err := Open(ctx, path)
	if err != nil {
		return 0, err
	}
	return SchemaVersion, s.Close()
}

func (s *Store) migrate(ctx context.Context) error {
	var have int
	err := s.whileBusy(ctx, func() error {
		return s.wc.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have)
	})
	if err != nil {
		return err
	}
	if have == SchemaVersion {
		return nil
	}
	if have > SchemaVersion || !s.cfg.migrate {
		return &SchemaError{Path: s.path, Have: have, Want: SchemaVersion}
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	err = func() error {
		if err := s.wc.QueryRowContext(ctx, "PRAGMA user_version").Scan(&have); err != nil {
			return err
		}
		if have > SchemaVersion {
			return &SchemaError{Path: s.path, Have: have, Want: SchemaVersion}
		}
		names, err := fs.Glob(migrationFiles, "migrations/*.sql")
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			v, err := strconv.Atoi(strings.SplitN(filepath.Base(n), "_", 2)[0])
			if err != nil || v <= have {
				continue
			}
			text, err := migrationFiles.ReadFile(n)
			if err != nil {
				return err
			}
			if _, err := s.wc.ExecContext(ctx, string(text)); err != nil {
				return fmt.Errorf("migration %s: %w", filepath.Base(n), err)
			}
		}
		_, err = s.wc.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(SchemaVersion))
		return err
	}()
	if err != nil {
		_, _ = s.wc.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	_, err = s.wc.ExecContext(ctx, "COMMIT")
	return err
}
