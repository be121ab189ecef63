package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/store"
)

// electWritesSQL is the table the leaders of an election run write to, on
// the run's own cluster: one row per write, each made under Guard with the
// term's token. Its ids are taken inside the guarded transaction, so their
// order is the order of the terms.
const electWritesSQL = `CREATE TABLE IF NOT EXISTS elchaos_writes (
    id    bigserial PRIMARY KEY,
    token bigint NOT NULL,
    cand  text NOT NULL,
    at    timestamptz NOT NULL DEFAULT clock_timestamp()
)`

// The events of an election run's ledger, one line each: "NANOS EVENT
// TOKEN CANDIDATE PID PPID", NANOS the wall clock (shared by every process
// of the host), PID the command's, PPID its `sleeplock elect`'s.
const (
	evStart   = "start"   // the command began (its term's first moment it knows of)
	evWrite   = "write"   // a write under Guard committed
	evRefused = "refused" // Guard refused a write: the term had ended
	evEnd     = "end"     // the command ends (its last writes done, or told to stop)
	evOrphan  = "orphan"  // its elect died: it stops without writing
)

// ledgerFile appends events to the run's ledger (O_APPEND: each line one
// write, whole, among the commands' lines).
type ledgerFile struct {
	mu        sync.Mutex
	f         *os.File
	token     int64
	cand      string
	pid, ppid int
}

func (l *ledgerFile) log(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.f, "%d %s %d %s %d %d\n", time.Now().UnixNano(), ev, l.token, l.cand, l.pid, l.ppid)
}

// ElectCommand is what each `sleeplock elect` of an election run runs
// while it leads (chaos/electcmd): with the term's SLEEPLOCK_TOKEN,
// SLEEPLOCK_REF, SLEEPLOCK_LOCK and SLEEPLOCK_LEADER_ID, it writes its
// token to elchaos_writes every Every, each write in a transaction fenced
// by pgstore's Guard, Writes times, and records every step in the ledger
// file. A refused write (the term has ended) does not stop it: elect
// must. It stops after its writes, when ctx ends (SIGTERM from elect), or
// when its elect has died (its parent changed).
type ElectCommand struct {
	DSN    string
	Ledger string
	Writes int
	Every  time.Duration
}

// Run runs the command.
func (c ElectCommand) Run(ctx context.Context) error {
	token, err := strconv.ParseInt(os.Getenv("SLEEPLOCK_TOKEN"), 10, 64)
	if err != nil {
		return fmt.Errorf("SLEEPLOCK_TOKEN: %w", err)
	}
	ref, name, cand := os.Getenv("SLEEPLOCK_REF"), os.Getenv("SLEEPLOCK_LOCK"), os.Getenv("SLEEPLOCK_LEADER_ID")
	if ref == "" || name == "" || cand == "" {
		return errors.New("SLEEPLOCK_REF, SLEEPLOCK_LOCK and SLEEPLOCK_LEADER_ID are needed: run me under sleeplock elect")
	}
	f, err := os.OpenFile(c.Ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	lg := &ledgerFile{f: f, token: token, cand: cand, pid: os.Getpid(), ppid: os.Getppid()}
	lg.log(evStart)
	defer lg.log(evEnd)

	s, err := pgstore.Open(ctx, c.DSN)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	pool, err := pgxpool.New(ctx, c.DSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	h := store.Handle{Lock: store.Lock{Name: name, Token: token}, Ref: store.RefOf(ref)}
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	for range c.Writes {
		if os.Getppid() != lg.ppid {
			lg.log(evOrphan)
			return nil
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := s.Guard(ctx, tx, h); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO elchaos_writes (token, cand) VALUES ($1, $2)", token, cand)
			return err
		})
		switch {
		case err == nil:
			lg.log(evWrite)
		case errors.Is(err, store.ErrLeaseLost):
			lg.log(evRefused) // and on, as a command that ignores it: elect must end it
		case ctx.Err() != nil:
			return nil
		}
		// Other errors (a connection terminated, the server restarting):
		// try again at the next tick; elect ends the command if the term
		// is lost meanwhile.
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}
