// Command chatturns runs the turn loop of a chat back end on two nodes with
// package turns: rounds with a held-check before each, a confirmation click
// that holds the user's next turn back until the click is done, and a node
// that goes down mid-turn, whose locks another node cleans up once they are
// older than the turn TTL.
//
//	go run ./examples/chatturns                                  # memory store
//	go run ./examples/chatturns --store postgres://localhost/db  # PostgreSQL
//
// With --store both nodes share the locks in PostgreSQL (schema "sleeplock",
// created if missing), each through a connection pool of its own, and the
// database's clock judges the TTLs. The TTLs are seconds here so that the
// walk-through ends quickly; a real turn TTL is minutes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sleeplock/sleeplock"
	"github.com/sleeplock/sleeplock/memstore"
	"github.com/sleeplock/sleeplock/pgstore"
	"github.com/sleeplock/sleeplock/turns"
)

const (
	turnTTL = 2 * time.Second        // how long a turn may run before it may be taken over
	hold    = 500 * time.Millisecond // how long a click blocks a turn unless kept
	chat    = "42"
	user    = "7"
)

func main() {
	dsn := flag.String("store", "", "PostgreSQL DSN (postgres://…); the memory store when empty")
	flag.Parse()
	ctx := context.Background()
	a, b, closeAll, err := nodes(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatturns:", err)
		os.Exit(1)
	}
	defer closeAll()
	if err := run(ctx, os.Stdout, a, b); err != nil {
		fmt.Fprintln(os.Stderr, "chatturns:", err)
		os.Exit(1)
	}
}

// nodes returns the Turns of two nodes that share their locks.
func nodes(ctx context.Context, dsn string) (a, b *turns.Turns, closeAll func(), err error) {
	if dsn == "" {
		s := memstore.New()
		l := sleeplock.New(s)
		a, b = turns.New(l, turns.WithTTL(turnTTL)), turns.New(l, turns.WithTTL(turnTTL))
		return a, b, func() { _ = l.Close() }, a.Define(ctx)
	}
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	var ts [2]*turns.Turns
	for i := range ts {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		closers = append(closers, pool.Close)
		if err := pgstore.Migrate(ctx, pool); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		s, err := pgstore.New(ctx, pool)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		l := sleeplock.New(s)
		closers = append([]func(){func() { _ = l.Close() }}, closers...)
		ts[i] = turns.New(l, turns.WithTTL(turnTTL))
	}
	return ts[0], ts[1], closeAll, ts[0].Define(ctx)
}

// run is the walk-through; it prints on out.
func run(ctx context.Context, out io.Writer, a, b *turns.Turns) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%5.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	// Node A runs turn-1 of chat 42 for user 7, three rounds. The lease's
	// fencing tokens (the chat's and the user's) guard what the turn writes;
	// everything else works by the turn's ref alone.
	turn1, err := a.Acquire(ctx, chat, user, "turn-1")
	if err != nil {
		return err
	}
	say("node A: turn-1 started in chat %s for user %s, fencing tokens %v", chat, user, turn1.Tokens())
	for round := 1; round <= 3; round++ {
		if held, err := a.Held(ctx, chat, user, "turn-1"); err != nil || !held {
			say("node A: turn-1 no longer holds its locks: stop")
			break
		}
		say("node A: turn-1 round %d", round)
		if round == 2 {
			_, err := b.AcquireUser(ctx, user, turns.ClickRef(), turnTTL, hold)
			say("node B: the user clicks a confirmation card: %s", outcome(err))
		}
	}
	if err := a.Release(ctx, chat, user, "turn-1"); err != nil {
		return err
	}
	say("node A: turn-1 done")

	// The click runs now, longer than its hold, keeping its lock fresh.
	click := turns.ClickRef()
	if _, err := b.AcquireUser(ctx, user, click, turnTTL, hold); err != nil {
		return err
	}
	say("node B: the click (ref %s) runs, keeping its lock fresh", short(click))
	for range 3 {
		time.Sleep(hold / 2)
		if _, err := b.KeepUser(ctx, user, click, turnTTL, hold); err != nil {
			return err
		}
		_, err := a.Acquire(ctx, "43", user, "turn-2")
		say("node A: turn-2 in chat 43: %s", outcome(err))
		if err == nil {
			return errors.New("a turn started while a click ran")
		}
	}
	if err := b.ReleaseUser(ctx, user, click); err != nil {
		return err
	}
	say("node B: the click is done")

	// With the click done, the user's turn-2 in chat 43 runs.
	turn2, err := a.Acquire(ctx, "43", user, "turn-2")
	say("node A: turn-2 in chat 43: %s", outcome(err))
	if err != nil {
		return err
	}
	say("node A: turn-2 runs, fencing tokens %v", turn2.Tokens())
	if err := a.Release(ctx, "43", user, "turn-2"); err != nil {
		return err
	}
	say("node A: turn-2 done")

	// Node A starts turn-3 and goes down mid-turn: it never releases.
	if _, err := a.Acquire(ctx, chat, user, "turn-3"); err != nil {
		return err
	}
	say("node A: turn-3 started … and node A goes down")
	_, err = b.Acquire(ctx, chat, "8", "turn-4")
	say("node B: turn-4 in chat %s for user 8: %s", chat, outcome(err))
	gone, err := b.ReleaseStale(ctx, chat, user, "turn-3", turnTTL)
	if err != nil {
		return err
	}
	say("node B: turn-3 is younger than the turn TTL: released as stale? %v", gone)
	for {
		fresh, err := b.Fresh(ctx, chat, "turn-3", turnTTL)
		if err != nil {
			return err
		}
		if !fresh {
			break
		}
		time.Sleep(turnTTL / 4)
	}
	gone, err = b.ReleaseStale(ctx, chat, user, "turn-3", turnTTL)
	if err != nil {
		return err
	}
	say("node B: turn-3 is older than %v: released as stale? %v", turnTTL, gone)
	turn4, err := b.Acquire(ctx, chat, user, "turn-4")
	if err != nil {
		return err
	}
	say("node B: turn-4 started in chat %s for user %s, fencing tokens %v", chat, user, turn4.Tokens())
	return b.Release(ctx, chat, user, "turn-4")
}

// outcome says how an acquisition went, in the walk-through's words.
func outcome(err error) string {
	switch {
	case err == nil:
		return "started"
	case errors.Is(err, turns.ErrConversationBusy):
		return "refused: the chat has a turn running"
	case errors.Is(err, turns.ErrTurnInFlight):
		return "refused: the user has a turn in flight"
	case errors.Is(err, turns.ErrClickInFlight):
		return "refused: a click of the user is in flight"
	}
	return err.Error()
}

// short shortens a click's ref ("click:" and 32 hex digits) for reading.
func short(ref string) string {
	if len(ref) > len("click:")+8 {
		return ref[:len("click:")+8] + "…"
	}
	return ref
}
