package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// rrow is one result row of the release and undo functions, with the
// event's Seq.
type rrow struct {
	ev                      string
	idx                     int32
	lock                    string
	slots, running, waiting int32
	ref, kind               string
	token, at, dur          int64
	weight                  int32 // the released hold's
	seq                     int64
}

// scanRelease runs q, a call of release_one(), release() or undo().
func (s *Store) scanRelease(ctx context.Context, q string, args []any) ([]rrow, error) {
	var out []rrow
	err := s.c.query(ctx, q, args, func(scan func(...any) error) error {
		var r rrow
		if err := scan(&r.ev, &r.idx, &r.lock, &r.slots, &r.running, &r.waiting, &r.ref, &r.kind, &r.token, &r.at, &r.dur,
			&r.weight, &r.seq); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// releaseSingle releases a lease of one lock: releaseFast when the lock
// was last seen fast (see fastHints), else, or when that released nothing,
// releaseOne. Whichever ends the hold times it when sampled (see
// sampled; decided once per Release, before its retries).
func (s *Store) releaseSingle(ctx context.Context, h *store.Handle, events, sampled bool) ([]rrow, error) {
	if rows, err := s.releaseFast(ctx, h, events, sampled); err != nil || len(rows) > 0 {
		return rows, err
	}
	return s.releaseOne(ctx, h, events, sampled)
}

// sampled reports whether the release of h is to time its holds although
// their tokens are not timed(): some lock of h is due (sampleDue: the
// first release of a lock by this store, then one every holdSampleEvery),
// on every path a hold ends by, fast row or holder rows. A hold whose
// token is timed, or a release without tokens, is timed or not by token.
func (s *Store) sampled(h *store.Handle) bool {
	now := time.Now().UnixNano()
	due := false
	h.Each(func(l store.Lock) {
		if l.Token != 0 && !timed(l.Token) && s.fast.sampleDue(l.Name, now) {
			due = true
		}
	})
	return due
}

// timed reports whether the hold of token is one whose length is recorded:
// timed() of sql/stats.sql, one in holdSampling.
func timed(token int64) bool { return token%holdSampling == 0 }

// releaseFast releases a lease held in its lock's row by one UPDATE of
// the row: release_fast.sql (with the event's columns, withEvents), or
// release_slot.sql for a lock of several slots; after a weighted grant in
// the row (acquire_weighted.sql), which is the row's scalar holder,
// release_fast.sql with the hold's weight (releaseWeighted). Each times
// the hold when told to: its token is timed(), or the lock is sampled. No
// rows: nothing changed.
func (s *Store) releaseFast(ctx context.Context, h *store.Handle, events, sampled bool) ([]rrow, error) {
	ref := h.Ref.String()
	inRow := s.fast.isWeightedInRow(h.Name)
	many := s.fast.isMany(h.Name) && !inRow
	// (an event of a slot in the arrays needs the lock's counts:
	// release_one(), which frees it there too)
	if !s.fast.is(h.Name) || (many && events) {
		return nil, nil
	}
	// The hold is timed by its token (timed()), or when the lock is due
	// to be sampled by time (sampleDue).
	q, args := s.q.releaseFast, []any{h.Name, h.Token, ref, sampled || timed(h.Token)}
	switch {
	case inRow && events:
		q, args = s.q.releaseWeightedEvents, append(args, patterns(h.Name))
	case inRow:
		q = s.q.releaseWeighted
	case many:
		q = s.q.releaseSlot
	case events:
		q, args = s.q.releaseFastEvents, append(args, patterns(h.Name))
	}
	var rows []rrow
	err := s.c.query(ctx, q, args, func(scan func(...any) error) error {
		rows = append(rows, rrow{ev: "released", idx: 1, lock: h.Name, ref: ref, weight: 1})
		r := &rows[len(rows)-1]
		// (dur is scanned as the hold's start, then made its length)
		var err error
		if inRow {
			err = scan(&r.kind, &r.token, asTime(&r.at), asTime(&r.dur), &r.weight, &r.slots, &r.seq)
		} else {
			err = scan(&r.kind, &r.token, asTime(&r.at), asTime(&r.dur), &r.slots, &r.seq)
		}
		r.dur = max(r.at-r.dur, 0)
		return err
	})
	if err == nil && len(rows) == 0 {
		// Its row was taken from under the hint: another caller queued,
		// or took another slot.
		s.fast.contended(h.Name)
	}
	return rows, err
}

// releaseOne sends release_one(), which settles every case of one lock and
// hands the freed slot to the head waiters, and notes what it says of the
// lock's row for the next call.
func (s *Store) releaseOne(ctx context.Context, h *store.Handle, events, sampled bool) ([]rrow, error) {
	args := releaseOneArgs{name: h.Name, token: h.Token, ref: h.Ref.String(), events: events, pats: "{}", node: s.d.node,
		sample: sampled}
	if events {
		args.pats = patterns(h.Name)
	}
	rows, err := s.scanRelease(ctx, s.q.releaseOne, args.values())
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 && rows[0].ev == "released" && rows[0].running == 0 && rows[0].waiting == 0 {
		s.fast.set(h.Name, true) // nothing left: the lock's row is fast again
	}
	// A row 'handed': a grant this release made for a waiter of this store,
	// committed, since the statement's answer came after its commit. A row
	// 'fast': the lock's row stays fast, its slots in its arrays.
	return slices.DeleteFunc(rows, func(r rrow) bool {
		switch r.ev {
		case "handed":
			s.d.notified(r.ref)
		case "fast":
			s.fast.set(h.Name, true)
		default:
			return false
		}
		return true
	}), nil
}

func (s *Store) emitReleased(ev store.Emitter, rows []rrow, reason error) {
	for i := range rows {
		if r := &rows[i]; r.ev == "released" {
			s.ended(r.lock, r.ref, r.token, reason)
			emit(ev, store.Event{Type: store.EventReleased, Lock: r.lock, Slots: int(r.slots), Running: int(r.running),
				Waiting: int(r.waiting), Ref: r.ref, Kind: r.kind, Token: r.token, Weight: int(r.weight),
				Held: time.Duration(r.dur) * time.Microsecond, Time: fromMicros(r.at), Seq: uint64(r.seq)})
		}
	}
}

// releasingAll registers the release of each lock of h as releasing does,
// for release(), which hands freed slots to the head waiters too (each
// grant notified, a waiter of this store's included); the returned
// function ends them once the events are emitted.
func (s *Store) releasingAll(h *store.Handle) func() {
	var ends []func()
	h.Each(func(l store.Lock) { ends = append(ends, s.d.releasing(l.Name)) })
	return func() {
		for _, end := range ends {
			end()
		}
	}
}

func handleArgs(h *store.Handle) (names, tokens string) {
	var ns []string
	var ts []int64
	h.Each(func(l store.Lock) {
		ns = append(ns, l.Name)
		ts = append(ts, l.Token)
	})
	return textArray(ns), intArray(ts)
}

// undefined returns store.NotFound for the first lock of h that no
// definition covers, nil when each is covered. It runs only after a call
// found h not held: the common paths pay nothing for it.
func (s *Store) undefined(ctx context.Context, h *store.Handle) error {
	names, _ := handleArgs(h)
	var name string
	err := s.retry(ctx, true, func() error { return queryOne(ctx, s.c, s.q.undefined, []any{names}, &name) })
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return store.NotFound(name)
}

// Release implements store.Store in one statement, or two when the
// store's hint of the lock is stale: the bare UPDATE of a lock it saw
// fast, which finds the lock's row spilled and changes nothing, then
// release_one() (see fastHints). A release naming the ref alone (no
// token: not the holder's own, as LeaseOf's) is release()'s, which tells
// the holder's node of the holds it ends (lost()).
func (s *Store) Release(ctx context.Context, h store.Handle, ev store.Emitter) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if ev != nil && len(h.More) == 0 {
		// A waiter of this store that this release hands the lock to
		// emits its acquired event after this release's event.
		defer s.d.releasing(h.Name)()
	} else if ev != nil {
		defer s.releasingAll(&h)()
	}
	var rows []rrow
	sampled := s.sampled(&h)
	err := s.retry(ctx, false, func() error {
		var err error
		if len(h.More) == 0 && h.Token != 0 {
			rows, err = s.releaseSingle(ctx, &h, ev != nil, sampled)
		} else {
			names, tokens := handleArgs(&h)
			args := releaseArgs{names: names, tokens: tokens, ref: h.Ref.String(), events: ev != nil,
				sample: sampled}
			rows, err = s.scanRelease(ctx, s.q.release, args.values())
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	if len(rows) > 0 && rows[0].ev == "notfound" {
		return store.NotFound(rows[0].lock)
	}
	reason := store.ErrReleased
	if h.Token == 0 {
		reason = fmt.Errorf("%w: released by another caller naming its ref", store.ErrLeaseLost)
	}
	s.emitReleased(ev, rows, reason)
	var missing []string
	for _, r := range rows {
		if r.ev == "notheld" {
			missing = append(missing, fmt.Sprintf("%q", r.lock))
		}
	}
	if len(missing) > 0 {
		s.lostHandle(&h, "not held when its holder released it")
	}
	switch {
	case len(missing) == len(rows):
		return store.ErrNotHeld
	case len(missing) > 0:
		return fmt.Errorf("%w: %s", store.ErrNotHeld, strings.Join(missing, ", "))
	}
	return nil
}

// ReleaseStale implements store.Store in one statement.
func (s *Store) ReleaseStale(ctx context.Context, h store.Handle, staleAfter time.Duration, ev store.Emitter) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if ev != nil {
		defer s.releasingAll(&h)()
	}
	names, tokens := handleArgs(&h)
	args := releaseArgs{names: names, tokens: tokens, ref: h.Ref.String(), stale: micros(max(staleAfter, 0)), events: ev != nil,
		sample: s.sampled(&h)}
	var rows []rrow
	err := s.retry(ctx, false, func() error {
		var err error
		rows, err = s.scanRelease(ctx, s.q.release, args.values())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: release stale: %w", err)
	}
	if len(rows) > 0 && rows[0].ev == "notfound" {
		return false, store.NotFound(rows[0].lock)
	}
	s.emitReleased(ev, rows, fmt.Errorf("%w: released as stale", store.ErrLeaseLost))
	return len(rows) > 0, nil
}
