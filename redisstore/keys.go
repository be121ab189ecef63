package redisstore

import (
	"encoding/hex"
	"strings"
)

// root returns the hash tag of a name's keys: the name up to its first
// "/" (after the first byte), so that a lock and every family that can
// cover it ("a/b/c", "a/b/*", "a/*") share a Redis Cluster slot. A root
// with a brace is written in hex. lua/common.lua computes the same.
func root(name string) string {
	r := name
	if i := strings.IndexByte(name[min(1, len(name)):], '/'); i >= 0 {
		r = name[:i+1]
	}
	if strings.ContainsAny(r, "{}") {
		return hex.EncodeToString([]byte(r))
	}
	return r
}

// lockKey returns the key of a lock's holders and queue.
func (s *Store) lockKey(name string) string {
	return s.cfg.prefix + "{" + root(name) + "}:l:" + name
}

// rootKey returns the key of kind k ("d", "u", "q", "s", "n") of root r.
func (s *Store) rootKey(r, k string) string {
	return s.cfg.prefix + "{" + r + "}:" + k
}

// rootsKey is the set of the roots that have definitions.
func (s *Store) rootsKey() string { return s.cfg.prefix + "roots" }

// KeyTag returns the hash tag of the keys of lock name ("{root}"): on
// Redis Cluster, a key the caller writes with Guard must carry it, so
// that it lives in the lock's slot.
func KeyTag(name string) string { return "{" + root(name) + "}" }
