package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sleeplock/sleeplock/internal/endwatch"
	"github.com/sleeplock/sleeplock/internal/options"
	"github.com/sleeplock/sleeplock/internal/storecall"
	"github.com/sleeplock/sleeplock/store"
)

// Defaults of the options.
const (
	// DefaultPollInterval is the longest pause between two checks for
	// another process's change while callers wait.
	DefaultPollInterval = 2 * time.Millisecond
	// DefaultWaiterTTL is the lease of a waiter's place in the queue, for
	// waiters whose process cannot be checked.
	DefaultWaiterTTL = 10 * time.Second
	// DefaultBusyTimeout is how long an operation waits for another
	// process's transaction to end.
	DefaultBusyTimeout = 10 * time.Second
)

// slowPoll is how often a waiter far from the head of its queue (at
// least twice the lock's slots ahead) looks again; such waiters are not
// woken by changes, and while a store has only such waiters it does not
// poll for changes.
const slowPoll = 25 * time.Millisecond

// Errors of Open.
var (
	// ErrNotDatabase: the file exists but is not a SQLite database. It
	// also matches store.ErrInvalidConfig.
	ErrNotDatabase = errors.New("sqlitestore: not a SQLite database")
	// ErrSchemaTooNew: the database was made by a newer sleeplock. Errors
	// of Open that match it are *SchemaError.
	ErrSchemaTooNew = errors.New("sqlitestore: database schema is newer than this build")
)

// ErrReadOnly matches the error of a call that had to write the database
// and could not because the file (or its WAL or shared-memory file) cannot
// be written now: SQLite answered SQLITE_READONLY, or an I/O error while
// access(2) said the file or its WAL could not be written (made immutable,
// for example). It is transient, not a configuration error: once the file
// is writable again the store opens its connection anew if it must (SQLite
// keeps a connection opened while the file could not be written read-only
// for good), and the same call succeeds. The error also wraps SQLite's own
// (*sqlite.Error). A file this process has no permission to write is
// refused by Open with store.ErrInvalidConfig instead.
var ErrReadOnly = errors.New("sqlitestore: database cannot be written now")

// ErrBusy matches the error of a call that found the database busy (other
// connections' transactions holding it) for longer than the busy timeout
// (WithBusyTimeout): every statement of the store that finds it busy is
// tried again until then, so SQLite's SQLITE_BUSY itself never reaches a
// caller. The error also wraps SQLite's own (*sqlite.Error). A blocking
// Acquire never fails with it: it waits on until its context ends.
var ErrBusy = errors.New("sqlitestore: database busy")

// busyError is ErrBusy for a path, with SQLite's error.
type busyError struct {
	path string
	wait time.Duration
	err  error
}

func (e *busyError) Error() string {
	return fmt.Sprintf("sqlitestore: %s: database busy: other connections' transactions held it for longer than the busy timeout (%v)",
		e.path, e.wait)
}

func (e *busyError) Unwrap() []error { return []error{ErrBusy, e.err} }

// Option configures Open.
type Option func(*config)

type config struct {
	poll      time.Duration
	waiterTTL time.Duration
	busy      time.Duration
	migrate   bool
	group     func() int
	options.Errs
}

// WithPollInterval sets the longest pause between two checks for another
// process's change while callers wait (default 2ms). A check is a read of
// SQLite's shared memory, not a transaction.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		c.Fail(options.Positive("a poll interval", d))
		c.poll = d
	}
}

// WithWaiterTTL sets the lease of a waiter's place in the queue (default
// 10s): a waiter renews it while it waits, so the waiters of a process that
// cannot be checked by pid leave the queue this long after it died.
func WithWaiterTTL(d time.Duration) Option {
	return func(c *config) {
		c.Fail(options.Positive("a waiter TTL", d))
		c.waiterTTL = d
	}
}

// WithBusyTimeout sets how long an operation waits for another process's
// transaction to end before it fails (default 10s). A blocking Acquire does
// not fail when it passes: it tries again until a slot is granted or its
// context ends.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) {
		c.Fail(options.Positive("a busy timeout", d))
		c.busy = d
	}
}

// WithProcessGroup names a process group that keeps this store's holds
// after this process dies: group is called at each grant, and a hold whose
// process is gone is given back only once no process of the group it named
// then lives (0 names none). A supervisor that runs a command in a process
// group of its own names that group (sleeplock run and elect do), so that
// when the supervisor is killed (kill -9) the slot is given back once the
// command's processes are gone, not while they still run. The hold's TTL
// still bounds it, as it bounds a hung process.
func WithProcessGroup(group func() int) Option {
	return func(c *config) {
		if group == nil {
			c.Fail(fmt.Errorf("%w: WithProcessGroup needs a function, not nil", store.ErrInvalidConfig))
		}
		c.group = group
	}
}

// WithoutMigrate makes Open refuse a database whose schema is missing or older
// than SchemaVersion (a *SchemaError) instead of creating or upgrading it.
func WithoutMigrate() Option { return func(c *config) { c.migrate = false } }

// Store keeps locks in a SQLite file. It implements store.Store and
// store.Guarder. Its methods are safe for concurrent use; any number of
// processes may open the same file.
type Store struct {
	path string
	cfg  config
	db   *sql.DB
	id   string // names this store's waiter rows
	me   proc

	mu     sync.Mutex // serialises this store's transactions on wc
	wc     *sql.Conn  // nil after dropConn: begin opens another
	closed bool
	queued bool // this store has queued a waiter (Close removes its rows)
	// left are the tickets of waiters whose callers gave up and whose rows
	// could not be deleted then (the file could not be written): the
	// store's next write transaction deletes them.
	left []int64

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error

	w endwatch.Set

	// beforeCommit, when set (by tests, before the store is used), runs
	// just before each COMMIT of do, with the transaction.
	beforeCommit func(t *txn)
	// onBusy, when set (by tests, before the store is used), runs each
	// time a statement finds the database busy, before the pause.
	onBusy func()

	bmu     sync.Mutex
	bcast   chan struct{} // closed and replaced at each change
	nwait   int
	near    atomic.Int32  // waiters that may be granted soon: poll fast
	kick    chan struct{} // a waiter became near: poll now
	polling bool
	shut    bool // Close began: no new poller
	pollWG  sync.WaitGroup

	nlisten  atomic.Int32 // Listen calls not stopped: the poller reads even with no waiter near
	listenWG sync.WaitGroup
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Guarder = (*Store)(nil)
	_ store.Watcher = (*Store)(nil)
)

// Open opens (creating it if needed) the SQLite database at path and
// creates or upgrades its schema. The directory must exist and be writable
// (SQLite keeps its WAL and shared-memory files next to the database).
// Errors say what is wrong with the path: a missing or read-only directory,
// a file that is not a SQLite database (ErrNotDatabase), a schema newer than
// this build (ErrSchemaTooNew).
//
// A database file (or WAL, or shared-memory file) that this process has no
// permission to write, or that is on a read-only file system, is refused
// with store.ErrInvalidConfig: that does not pass by itself. A file that
// cannot be written for another reason at the moment (made immutable, for
// example) is opened when its schema is current: the store's writes then
// fail with ErrReadOnly until the file can be written again, and then
// succeed; when its schema must be created or upgraded, Open fails with
// ErrReadOnly.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{poll: DefaultPollInterval, waiterTTL: DefaultWaiterTTL, busy: DefaultBusyTimeout, migrate: true}
	if err := options.Apply(&cfg, &cfg.Errs, opts); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, storecall.ErrNilContext
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	db.SetMaxOpenConns(2) // one for transactions, one for change polling
	db.SetMaxIdleConns(2)
	db.SetConnMaxLifetime(0)
	s := &Store{path: path, cfg: cfg, db: db, me: self(), closing: make(chan struct{}), bcast: make(chan struct{}),
		kick: make(chan struct{}, 1)}
	var id [12]byte
	_, _ = rand.Read(id[:])
	s.id = hex.EncodeToString(id[:])
	err = s.whileBusy(ctx, func() error { return s.connect(ctx) })
	if err == nil {
		err = s.migrate(ctx)
	}
	if err != nil {
		if s.wc != nil {
			_ = s.wc.Close()
		}
		_ = db.Close()
		return nil, s.pathError(err)
	}
	return s, nil
}

// checkPath reports a path whose directory cannot hold the database.
func checkPath(path string) error {
	if path == "" {
		return store.Invalid(store.ErrInvalidConfig, `""`, "the SQLite store needs a file path")
	}
	if strings.ContainsRune(path, 0) || strings.ContainsAny(path, "?#") {
		return store.Invalid(store.ErrInvalidConfig, strconv.Quote(path), "a SQLite file path must not contain NUL, '?' or '#'")
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: cannot create %s: directory %s does not exist", store.ErrInvalidConfig, path, dir)
	case err != nil:
		return fmt.Errorf("%w: cannot use %s: %w", store.ErrInvalidConfig, path, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: cannot create %s: %s is not a directory", store.ErrInvalidConfig, path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory, not a database file", store.ErrInvalidConfig, path)
	}
	// SQLite opens a file it cannot write read-only, and every write then
	// fails: refuse a file this process may not write. Other reasons not to
	// write it now (an immutable file) may pass (see Open).
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := mayNotWrite(f); err != nil {
			return fmt.Errorf("%w: cannot write %s: %w", store.ErrInvalidConfig, f, err)
		}
	}
	// SQLite creates its WAL and shared-memory files next to the database.
	f, err := os.CreateTemp(dir, ".sleeplock-check-*")
	if err != nil {
		return fmt.Errorf("%w: cannot use %s: directory %s is not writable (%w); SQLite needs to create files next to the database",
			store.ErrInvalidConfig, path, dir, err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return nil
}

// pathError turns SQLite's errors about the file into ones that name it.
func (s *Store) pathError(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return &busyError{path: s.path, wait: s.cfg.busy, err: err}
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%w: %s (%w)", ErrNotDatabase, s.path, store.ErrInvalidConfig)
	case sqlite3.SQLITE_READONLY:
		// Open refuses a file this process may not write (checkPath):
		// what is left here is a file that cannot be written for now.
		return fmt.Errorf("%w: %s: %w", ErrReadOnly, s.path, err)
	case sqlite3.SQLITE_IOERR:
		// A write through a connection opened while the file could be
		// written fails with an I/O error.
		if why := cannotWrite(s.path); why != nil {
			return fmt.Errorf("%w: %s (%w): %w", ErrReadOnly, s.path, why, err)
		}
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return fmt.Errorf("%w: cannot open %s: %w", store.ErrInvalidConfig, s.path, err)
	}
	return fmt.Errorf("sqlitestore: %s: %w", s.path, err)
}

// Path returns the database file's path.
func (s *Store) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// errNoStore is the error of a call of a nil or zero Store.
var errNoStore = store.Invalid(store.ErrInvalidConfig, "a nil or zero *sqlitestore.Store", "a Store comes from sqlitestore.Open")

// check reports a receiver or a context that cannot be used.
func (s *Store) check(ctx context.Context) error {
	return storecall.Check(ctx, s != nil && s.db != nil, errNoStore)
}

// Close removes this store's waiters from the queue (their callers return
// store.ErrClosed), makes later calls fail with store.ErrClosed and closes
// the database. Leases are not released.
func (s *Store) Close() error {
	if s == nil || s.db == nil {
		return errNoStore
	}
	s.closeOnce.Do(func() {
		s.bmu.Lock()
		s.shut = true
		s.bmu.Unlock()
		close(s.closing)
		s.pollWG.Wait()
		s.listenWG.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.busy)
		defer cancel()
		if s.queued {
			s.closeErr = s.removeWaiters(ctx)
		}
		if s.wc != nil {
			s.closeErr = errors.Join(s.closeErr, s.wc.Close())
		}
		s.closeErr = errors.Join(s.closeErr, s.db.Close())
	})
	return s.closeErr
}

// removeWaiters deletes this store's waiter rows; s.mu is held.
func (s *Store) removeWaiters(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return fmt.Errorf("sqlitestore: removing this store's waiters: %w", err)
	}
	_, err1 := s.wc.ExecContext(ctx, "DELETE FROM queue WHERE ticket IN (SELECT ticket FROM waiters WHERE owner = ?)", s.id)
	_, err2 := s.wc.ExecContext(ctx, "DELETE FROM waiters WHERE owner = ?", s.id)
	if err := errors.Join(err1, err2); err != nil {
		_, _ = s.wc.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("sqlitestore: removing this store's waiters: %w", err)
	}
	if _, err := s.wc.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = s.wc.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("sqlitestore: removing this store's waiters: %w", err)
	}
	return nil
}
