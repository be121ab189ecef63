package pgstore

import (
	"hash/maphash"
	"sync/atomic"
)

// fastHints remembers, per lock name (hashed into a fixed table, so two
// names may share an entry), whether the store last saw the lock fast
// (schema version 6): its state all in its row, which one UPDATE grants or
// releases (queries/acquire1.sql, release1.sql). Those statements settle
// nothing for a lock that is held, queued or has several slots held: the
// store would then need a second statement. So the store sends them only
// for a lock it saw fast, and otherwise the statement that settles every
// case (acquire1slow.sql, release1slow.sql); a lock it has not seen counts
// as slow. A wrong hint costs one round trip more, never a wrong answer.
type fastHints struct {
	seed  maphash.Seed
	table [1024]atomic.Bool
}

func (h *fastHints) init() { h.seed = maphash.MakeSeed() }

func (h *fastHints) entry(name string) *atomic.Bool {
	return &h.table[maphash.String(h.seed, name)%uint64(len(h.table))]
}

// is reports whether name was last seen fast.
func (h *fastHints) is(name string) bool { return h.entry(name).Load() }

// set records whether name was seen fast.
func (h *fastHints) set(name string, fast bool) {
	if e := h.entry(name); e.Load() != fast {
		e.Store(fast)
	}
}
