package memstore

import "sync"

// names maps a name to its lock: defined locks and family members in use.
// It is split in shards, each a map under a read-write mutex, so that
// lookups of unrelated names rarely touch the same memory and an entry
// costs a map slot (no boxed key, as in a sync.Map).
type names struct {
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
	sh := n.shard(name)
	sh.mu.RLock()
	lk := sh.m[name]
	sh.mu.RUnlock()
	return lk
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
