package pgstore

import (
	"errors"
	"fmt"

	"github.com/sleeplock/sleeplock/store"
)

// ErrSchemaMissing matches the error of New, NewSQL and Open when the
// schema has no sleeplock tables, or tables or functions of another build
// than this one: run `sleeplock migrate` (or Migrate). The error is a
// *SchemaError and also matches store.ErrInvalidConfig.
var ErrSchemaMissing = errors.New("pgstore: sleeplock schema missing or out of date")

// SchemaError reports a schema that this build cannot use as it is.
type SchemaError struct {
	Schema string // the schema name, as configured
	Have   int    // its version; 0 when it has no sleeplock tables
	Want   int    // the version this build needs
	// Functions is set when the tables are at this build's version but the
	// functions are another build's.
	Functions bool
}

// Error says what is wrong and what to run.
func (e *SchemaError) Error() string {
	if e == nil {
		return "pgstore: schema error (nil)"
	}
	switch {
	case e.Functions:
		return fmt.Sprintf("pgstore: schema %q has the functions of another sleeplock build: run `sleeplock migrate` (or pgstore.Migrate)", e.Schema)
	case e.Have == 0:
		return fmt.Sprintf("pgstore: schema %q has no sleeplock tables: run `sleeplock migrate` (or pgstore.Migrate) first", e.Schema)
	case e.Have < e.Want:
		return fmt.Sprintf("pgstore: schema %q is at version %d, this build needs version %d: run `sleeplock migrate` (or pgstore.Migrate)", e.Schema, e.Have, e.Want)
	default:
		return fmt.Sprintf("pgstore: schema %q is at version %d, newer than this build knows (%d): upgrade sleeplock", e.Schema, e.Have, e.Want)
	}
}

// Unwrap returns ErrSchemaMissing and store.ErrInvalidConfig.
func (e *SchemaError) Unwrap() []error { return []error{ErrSchemaMissing, store.ErrInvalidConfig} }

// ErrUnreachable matches the error of a call that gave up after the
// database could not be reached (connection refused or lost, server
// restarting) through a few retries of what was safe to retry. The error
// also wraps the last cause.
var ErrUnreachable = errors.New("pgstore: database unreachable")

// ErrMigrationChanged matches the error of Migrate for a schema in which a
// migration was applied whose text differs from this build's (a released
// migration is never edited). The error is a *ChecksumError and also
// matches store.ErrInvalidConfig.
var ErrMigrationChanged = errors.New("pgstore: an applied migration differs from this build's")

// ChecksumError reports an applied migration whose recorded checksum is
// not this build's.
type ChecksumError struct {
	Schema  string // the schema name, as configured
	Version int    // the migration's number
	Name    string // its name, as recorded
	Have    string // the recorded checksum (sha256, hex)
	Want    string // this build's
}

// Error names the migration and both checksums.
func (e *ChecksumError) Error() string {
	if e == nil {
		return "pgstore: checksum error (nil)"
	}
	return fmt.Sprintf("pgstore: schema %q: migration %d (%s) was applied with checksum %s, this build has %s: "+
		"a released migration must never change; use the sleeplock release that made the schema",
		e.Schema, e.Version, e.Name, e.Have, e.Want)
}

// Unwrap returns ErrMigrationChanged and store.ErrInvalidConfig.
func (e *ChecksumError) Unwrap() []error { return []error{ErrMigrationChanged, store.ErrInvalidConfig} }
