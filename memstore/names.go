package memstore

import (
	"sync"
	"sync/atomic"
)

// names maps a name to its lock: defined locks and family members in use.
// It is split in shards, each a map under a read-write mutex, so that
// lookups of unrelated names rarely touch the same memory and an entry
// costs a map slot (no boxed key, as in a sync.Map).
//
// Locks defined by name are removed only by a Delete, so they are also kept in an
// immutable snapshot that a lookup reads with one atomic load and no
// write: the hot path of a defined lock touches no shared memory. A
// snapshot is made again (in time linear in the defined locks) once the
// lookups that missed it outnumber them while some are not in it yet.
type names struct {
	snap   atomic.Pointer[map[string]*lock]
	dirty  atomic.Int32 // defined locks not in snap
	misses atomic.Int32 // lookups that missed snap while dirty
	ndefs  atomic.Int32 // len(defs)
	mu     sync.Mutex   // guards defs
	defs   map[string]*lock
	shards [nameShards]nameShard
}

const nameShards = 64

type nameShard struct {
	mu sync.RWMutex
	m  map[string]*lock
	_  [32]byte // keep neighbouring shards' mutexes off one cache line
}

// shard picks the shard of name by a cheap hash of its length and last
// bytes (where names that share a prefix differ).
func (n *names) shard(name string) *nameShard {
	h := uint32(len(name))
	for i := max(0, len(name)-6); i < len(name); i++ {
		h = h*31 + uint32(name[i])
	}
	return &n.shards[(h^h>>7)%nameShards]
}

// Load returns the lock named name, or nil.
func (n *names) Load(name string) *lock {
	if m := n.snap.Load(); m != nil {
		if lk := (*m)[name]; lk != nil {
			return lk
		}
	}
	sh := n.shard(name)
	sh.mu.RLock()
	lk := sh.m[name]
	sh.mu.RUnlock()
	if n.dirty.Load() > 0 && n.misses.Add(1) >= n.ndefs.Load() {
		n.promote()
	}
	return lk
}

// Defined records that lk, stored under name, is now a lock defined by
// name (until a Delete: Undefine).
func (n *names) Defined(name string, lk *lock) {
	n.mu.Lock()
	if n.defs == nil {
		n.defs = make(map[string]*lock)
	}
	if n.defs[name] == nil {
		n.defs[name] = lk
		n.ndefs.Add(1)
		n.dirty.Add(1)
	}
	n.mu.Unlock()
}

// Undefine removes name, defined as lk, from the defined locks (a
// Delete), and makes the snapshot again at once: a lookup must not find
// the deleted record in it. The caller removes name from its shard too.
func (n *names) Undefine(name string, lk *lock) {
	n.mu.Lock()
	if n.defs[name] != lk {
		n.mu.Unlock()
		return
	}
	delete(n.defs, name)
	n.ndefs.Add(-1)
	n.dirty.Add(1)
	n.mu.Unlock()
	n.promote()
}

// promote makes a new snapshot of the defined locks.
func (n *names) promote() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dirty.Load() == 0 {
		return
	}
	m := make(map[string]*lock, len(n.defs))
	for k, v := range n.defs {
		m[k] = v
	}
	n.dirty.Store(0)
	n.misses.Store(0)
	n.snap.Store(&m)
}

// Store maps name to lk.
func (n *names) Store(name string, lk *lock) {
	sh := n.shard(name)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[string]*lock)
	}
	sh.m[name] = lk
	sh.mu.Unlock()
}

// CompareAndDelete removes name if it maps to lk.
func (n *names) CompareAndDelete(name string, lk *lock) {
	sh := n.shard(name)
	sh.mu.Lock()
	if sh.m[name] == lk {
		delete(sh.m, name)
	}
	sh.mu.Unlock()
}

// Range calls f for every lock (a snapshot of each shard in turn) until f
// returns false.
func (n *names) Range(f func(lk *lock) bool) {
	var buf []*lock
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.RLock()
		buf = buf[:0]
		for _, lk := range sh.m {
			buf = append(buf, lk)
		}
		sh.mu.RUnlock()
		for _, lk := range buf {
			if !f(lk) {
				return
			}
		}
	}
}
