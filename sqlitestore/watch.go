package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// ending is a hold this store saw end, for its watchers.
type ending struct {
	lock, ref string
	token     int64
	reason    error
}

// Why a caller other than its holder ended a hold, as the table ended
// records it.
const (
	endByRef   = "r" // released naming its ref
	endStale   = "s" // released as stale
	endDeleted = "d" // its lock deleted with force
)

// endedKeep is how long a row of the table ended is kept: the holder's
// process reads it within a poll interval of its commit; one that has
// not by then (stopped, or not watching) learns the end at its next
// renewal.
const endedKeep = time.Minute

// watchPoll is how often the change poller looks for a change while it
// only has holds to watch (no waiter, no listener).
const watchPoll = 100 * time.Millisecond

// Watch implements store.Watcher: f is called when the hold of h's first
// lock ends, at once if this store has seen that already. A hold ended
// here (released, taken over, found gone by an operation of this store)
// is seen at once. A hold that another process (or another store on the
// file) released naming its ref, released as stale or deleted with force
// is seen within about 100ms: that process's transaction records it in
// the table ended, and while this store has holds to watch its change
// poller reads the table whenever the file changes (PRAGMA data_version).
// A hold taken over by another process after its TTL is learnt by the
// holder's next renewal.
func (s *Store) Watch(h store.Handle, f func(reason error)) {
	if s == nil || f == nil {
		return
	}
	s.w.Watch(h.Name, h.Ref.String(), h.Token, f)
	if s.db != nil {
		s.startPoller()
	}
}

func (s *Store) ended(e ending) { s.w.Ended(e.lock, e.ref, e.token, e.reason) }

func lostBecause(why string) error { return fmt.Errorf("%w: %s", store.ErrLeaseLost, why) }

// endReason is the reason a hold of lock ended by another caller (why) is
// lost, as the other stores give it.
func endReason(why, lock string) error {
	switch why {
	case endDeleted:
		return store.DeletedHold(lock)
	case endStale:
		return lostBecause("released as stale")
	}
	return lostBecause("released by another caller naming its ref")
}

// tell records in the table ended that a caller other than its holder
// ended a hold (why), and at the first in the transaction deletes the
// rows older than endedKeep. A holder's own release records nothing.
func (t *txn) tell(lock, ref string, token int64, why string) error {
	if !t.told {
		t.told = true
		if err := t.exec("DELETE FROM ended WHERE at < ?", t.now-endedKeep.Microseconds()); err != nil {
			return err
		}
	}
	return t.exec("INSERT INTO ended (lock, ref, token, why, at) VALUES (?, ?, ?, ?, ?)", lock, ref, token, why, t.now)
}

// readEnded ends the watches of the holds recorded in the table ended
// after id after (every recorded hold is passed to the watchers' set,
// which keeps the last ends for a Watch that comes later), and returns
// the last id read.
func (s *Store) readEnded(ctx context.Context, c *sql.Conn, after int64) (int64, error) {
	rows, err := c.QueryContext(ctx, "SELECT id, lock, ref, token, why FROM ended WHERE id > ? ORDER BY id", after)
	if err != nil {
		return after, err
	}
	var ends []ending
	last := after
	for rows.Next() {
		var e ending
		var why string
		if err := rows.Scan(&last, &e.lock, &e.ref, &e.token, &why); err != nil {
			_ = rows.Close()
			return after, err
		}
		e.reason = endReason(why, e.lock)
		ends = append(ends, e)
	}
	if err := rows.Close(); err != nil {
		return after, err
	}
	if err := rows.Err(); err != nil {
		return after, err
	}
	for _, e := range ends {
		s.ended(e)
	}
	return last, nil
}
