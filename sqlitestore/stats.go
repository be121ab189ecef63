package sqlitestore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sleeplock/sleeplock/store"
)

// statDelta is what a transaction adds to the counters of one definition
// (table stats); written once, at the end of the transaction (flush),
// with the transaction's other writes.
type statDelta struct {
	acquisitions, releases, refusals, expiries, losses int64
	waited, holds                                      int64
	waitSum, holdSum                                   time.Duration
	waits, holdBuckets                                 [store.HistogramBuckets]int64
}

// stat returns the delta of l's definition.
func (t *txn) stat(l *lk) *statDelta {
	if t.stats == nil {
		t.stats = map[string]*statDelta{}
	}
	d := t.stats[l.def]
	if d == nil {
		d = &statDelta{}
		t.stats[l.def] = d
	}
	return d
}

// granted counts a grant of l that waited since (0: did not wait).
func (t *txn) granted(l *lk, since int64) {
	d := t.stat(l)
	d.acquisitions++
	if since > 0 {
		w := max(0, micros(t.now-since))
		d.waited++
		d.waitSum += w
		d.waits[store.Bucket(w)]++
	}
}

// ended counts the end of hold h of l: a release (typ released) or an
// expiry; lost when reason is not the holder's own release.
func (t *txn) ended(l *lk, h *hrow, typ store.EventType, reason error) {
	d := t.stat(l)
	if typ == store.EventExpired {
		d.expiries++
	} else {
		d.releases++
	}
	if reason != store.ErrReleased { //nolint:errorlint // the sentinel itself
		d.losses++
	}
	held := max(0, micros(t.now-h.acquired))
	d.holds++
	d.holdSum += held
	d.holdBuckets[store.Bucket(held)]++
}

var statColumns = func() []string {
	cols := []string{"acquisitions", "releases", "refusals", "expiries", "losses", "waited", "wait_us", "holds", "hold_us"}
	for i := range store.HistogramBuckets {
		cols = append(cols, fmt.Sprintf("w%d", i))
	}
	for i := range store.HistogramBuckets {
		cols = append(cols, fmt.Sprintf("h%d", i))
	}
	return cols
}()

var upsertStats = func() string {
	set := make([]string, len(statColumns))
	for i, c := range statColumns {
		set[i] = c + " = " + c + " + excluded." + c
	}
	return "INSERT INTO stats (name, " + strings.Join(statColumns, ", ") + ") VALUES (?" +
		strings.Repeat(", ?", len(statColumns)) + ") ON CONFLICT (name) DO UPDATE SET " + strings.Join(set, ", ")
}()

// flushStats writes the transaction's counters: one statement per
// definition it touched.
func (t *txn) flushStats() error {
	for name, d := range t.stats {
		args := []any{name, d.acquisitions, d.releases, d.refusals, d.expiries, d.losses, d.waited,
			d.waitSum.Microseconds(), d.holds, d.holdSum.Microseconds()}
		for _, n := range d.waits {
			args = append(args, n)
		}
		for _, n := range d.holdBuckets {
			args = append(args, n)
		}
		if err := t.exec(upsertStats, args...); err != nil {
			return err
		}
		delete(t.stats, name)
	}
	return nil
}

// Stats implements store.StatsReader: the definitions with their
// counters and the holders and waiters of their locks, in one read
// transaction of three statements (a local file: no round trips). Every
// hold is timed (HoldSampling 1): the rows record when they were taken.
func (s *Store) Stats(ctx context.Context) ([]store.Stats, error) {
	var out []store.Stats
	err := s.read(ctx, func(t *txn) error {
		out = out[:0]
		at := map[string]int{}
		famSlots := map[string]int{}
		seen := map[string]bool{}
		err := t.query("SELECT d.name, d.slots, d.family, coalesce(s."+strings.Join(statColumns, ", 0), coalesce(s.")+
			", 0) FROM defs d LEFT JOIN stats s ON s.name = d.name", nil, func(scan func(...any) error) error {
			e, slots, err := scanStat(scan)
			if err != nil {
				return err
			}
			if e.Family {
				famSlots[e.Name] = slots // e.Slots: the sum of its members in use, below
			}
			at[e.Name] = len(out)
			out = append(out, e)
			return nil
		})
		if err != nil {
			return err
		}
		// The holders and waiters of every lock in use, by lock.
		return t.query(`SELECT lock, sum(expires = 0 OR expires > ?), sum(expires != 0 AND expires <= ?), 0 FROM holders GROUP BY lock
			UNION ALL SELECT lock, 0, 0, count(*) FROM queue GROUP BY lock`, []any{t.now, t.now},
			func(scan func(...any) error) error {
				var name string
				var running, expired, waiting int
				if err := scan(&name, &running, &expired, &waiting); err != nil {
					return err
				}
				i, ok := at[name]
				if !ok {
					store.FamilyOf(name, func(p string) bool {
						i, ok = at[p]
						return !ok
					})
				}
				if !ok {
					return nil // its definition is gone
				}
				e := &out[i]
				e.Running += running
				e.Expired += expired
				e.Waiting += waiting
				if e.Family && !seen[name] {
					seen[name] = true
					e.Locks++
					e.Slots += famSlots[e.Name]
				}
				return nil
			})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// scanStat reads a row of Stats' first statement: a definition and its
// counters. slots is the definition's; a family's e.Slots is 0, for the
// sum of its members in use.
func scanStat(scan func(...any) error) (e store.Stats, slots int, err error) {
	var family bool
	var c [9]int64
	var w, h [store.HistogramBuckets]uint64
	dest := []any{&e.Name, &e.Slots, &family}
	for i := range c {
		dest = append(dest, &c[i])
	}
	for i := range w {
		dest = append(dest, &w[i])
	}
	for i := range h {
		dest = append(dest, &h[i])
	}
	if err := scan(dest...); err != nil {
		return e, 0, err
	}
	e.Family, e.HoldSampling = family, 1
	slots = e.Slots
	if family {
		e.Slots = 0
	} else {
		e.Locks = 1
	}
	e.Acquisitions, e.Releases, e.Refusals, e.Expiries, e.Losses = uint64(c[0]), uint64(c[1]), uint64(c[2]), uint64(c[3]), uint64(c[4])
	e.Waits = store.Histogram{Buckets: w, Count: uint64(c[5]), Sum: micros(c[6])}
	e.Holds = store.Histogram{Buckets: h, Count: uint64(c[7]), Sum: micros(c[8])}
	if e.Acquisitions > e.Waits.Count {
		e.Waits.Buckets[0] += e.Acquisitions - e.Waits.Count
		e.Waits.Count = e.Acquisitions
	}
	return e, slots, nil
}

var _ store.StatsReader = (*Store)(nil)
