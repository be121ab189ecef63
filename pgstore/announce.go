package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sleeplock/sleeplock/store"
)

var (
	_ store.Relabeler = (*Store)(nil)
	_ store.Announcer = (*Store)(nil)
)

// relabelSQL sets the kind of a hold wherever it is: in its lock's fast
// row (one holder, or a slot of the row's arrays) or in a holder row.
// Arguments: name, ref, token (0: any), kind. It returns the holds changed.
const relabelSQL = `WITH f AS (
    UPDATE {{schema}}.locks l
       SET kind = CASE WHEN l.ref = $2 AND ($3 = 0 OR l.token = $3) THEN $4 ELSE l.kind END,
           xkind = CASE WHEN l.xref IS NULL THEN l.xkind ELSE
                   (SELECT array_agg(CASE WHEN u.r = $2 AND ($3 = 0 OR u.t = $3) THEN $4 ELSE u.k END ORDER BY u.o)
                      FROM unnest(l.xref, l.xkind, l.xtoken) WITH ORDINALITY AS u(r, k, t, o)) END
     WHERE l.name = $1 AND {{schema}}.row_holds(l, $2, $3)
    RETURNING 1
), h AS (
    UPDATE {{schema}}.holders h SET kind = $4
     WHERE h.lock = $1 AND h.ref = $2 AND ($3 = 0 OR h.token = $3)
    RETURNING 1
)
SELECT (SELECT count(*) FROM f) + (SELECT count(*) FROM h)`

// announcePrefix starts the payload of an announcement on the schema's
// channel, which also carries the waiters' wake-ups: "a <name>\n<msg>".
const announcePrefix = "a "

// Relabel implements store.Relabeler in one statement.
func (s *Store) Relabel(ctx context.Context, h store.Handle, kind string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	h.More = nil
	q := strings.ReplaceAll(relabelSQL, "{{schema}}", quoteIdent(s.cfg.schema))
	var n int64
	err := s.retry(ctx, true, func() error {
		return queryOne(ctx, s.c, q, []any{h.Name, h.Ref.String(), h.Token, kind}, &n)
	})
	if err != nil {
		return fmt.Errorf("pgstore: relabel: %w", err)
	}
	if n == 0 {
		if err := s.undefined(ctx, &h); err != nil {
			return err
		}
		return store.ErrNotHeld
	}
	return nil
}

// Announce implements store.Announcer with a notification on the schema's
// channel (one statement): every store on the schema that listens, in any
// process, passes it to its listeners of name.
func (s *Store) Announce(ctx context.Context, name, msg string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	payload := announcePrefix + name + "\n" + msg
	err := s.retry(ctx, true, func() error {
		return s.c.exec(ctx, "SELECT pg_notify($1, $2)", channelOf(s.cfg.schema), payload)
	})
	if err != nil {
		return fmt.Errorf("pgstore: announce: %w", err)
	}
	return nil
}

// Listen implements store.Announcer on the store's LISTEN connection (the
// one its waiters use), which it opens if no waiter has yet. f gets an
// empty message whenever that connection comes back after it was lost
// (notifications sent meanwhile are gone). A store made without a
// connection configuration to listen on gets no message.
func (s *Store) Listen(name string, f func(msg string)) (stop func()) {
	if s == nil || f == nil || s.c == nil {
		return func() {}
	}
	stop = s.d.ann.Listen(name, f)
	if !s.d.startListening() {
		stop()
		return func() {}
	}
	return stop
}

// announced passes the payload of an announcement to its listeners; false
// when payload is not one.
func (d *dispatcher) announced(payload string) bool {
	rest, ok := strings.CutPrefix(payload, announcePrefix)
	if !ok {
		return false
	}
	if name, msg, ok := strings.Cut(rest, "\n"); ok {
		d.ann.Send(name, msg)
	}
	return true
}
