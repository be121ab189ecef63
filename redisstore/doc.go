// Package redisstore keeps sleeplock's locks in Redis (7 or later), shared
// by every node that uses the same server and key prefix. Leases expire on
// the server's clock, so the clocks of the nodes do not matter.
//
//	s, err := redisstore.Open(ctx, "redis://127.0.0.1:6379/0")
//	locks := sleeplock.New(s)
//
// or, on a client of the caller's (a *redis.Client, a *redis.ClusterClient
// (see Redis Cluster) or a failover client of github.com/redis/go-redis/v9):
//
//	s, err := redisstore.New(ctx, client, redisstore.WithPrefix("app:locks:"))
//
// # One round trip per operation
//
// Every operation is one call (FCALL) of a function of one Lua library
// (lua/*.lua, embedded: lua/common.lua, then one function per operation),
// run atomically on the server, on the server's clock (TIME): acquire
// (grant, refuse, or queue), release with hand-over to the waiters, keep,
// held, state, define, resize, delete and reconcile (Apply). The store loads the library (FUNCTION
// LOAD, on every primary of a cluster) the first time a server answers
// that it lacks it, and again after a restart that lost it; its name
// carries a hash of its code, so that stores of several versions can
// share a server (FUNCTION DELETE removes an old version's library once
// none of its stores runs; the store's user needs the @scripting
// commands, FUNCTION LOAD among them). A refused try writes nothing: no
// key changes, nothing is appended to the AOF, nothing is replicated.
// List and Stats run one call per root in one pipeline.
//
// # Keys
//
// The keys of a lock share the hash tag of its root: the name up to its
// first "/" (written in hex when it has a brace), so that a lock and every
// family that may cover it ("a/b/c", "a/b/*", "a/*") live in one Redis
// Cluster slot. With prefix P and root R:
//
//	P{R}:d        hash: definition → slots
//	P{R}:s        hash: the root's state: field NAME the record of lock NAME (no field when it has nobody
//	              and nothing left to count): with no queue and no grant unclaimed, a flat record (struct:
//	              the tally of holds left to count, then each holder's fields), else MessagePack (its
//	              queue's length, its holders, each a map of its fields); field "" the last token drawn,
//	              field "definition\tc" the definition's counters (MessagePack)
//	P{R}:w:NAME   list: the ids of the lock's waiters, oldest first
//	P{R}:b:NAME   hash: waiter id → its request (MessagePack)
//	P{R}:q        set: names with waiters
//	P{R}:n        hash: node → until when its waiters count as alive
//	Proots        set: the roots with definitions (for List and Stats)
//
// An operation reads a queue from its head, as far as it needs: a
// release that hands the lock over reads the waiters it grants and the
// next, however long the queue. State, List and Stats read whole queues.
//
// An uncontended acquire (one lock, no queue, no Emitter) runs four
// commands on the server: HMGET of the definition, HMGET of the lock's
// record with the root's last token, TIME, and one HSET of the two; its
// release, two: HGET of the record and HSET of it without the hold. A
// refused try reads the same and writes nothing.
//
// # Statistics
//
// Stats (store.StatsReader) reads P{R}:s of every root. The counts are
// exact: an acquisition is counted by the write that grants it, a hold
// by the write that ends it. The uncontended acquire and release count
// without writing a counter: a grant's holder is marked uncounted in the
// record, and a release adds the hold to a tally in the lock's flat record
// (an acquisition count, the hold time in all and the holds of each
// bucket), which the next write of that record
// by the general path adds to the counters; Stats counts the tallies left
// in the records before it reads. Such a hold is timed from its grant, on the
// server's clock, to the release as the releasing process reckons the
// server's clock (its own clock, offset by what the server answered its
// last acquire: within one round trip); every other hold, and every
// wait, is timed on the server's clock alone. Refusals are counted per
// process, in memory: a refused try writes nothing. A lock name released
// by the uncontended path and not acquired again keeps its record (tens of
// bytes) until Stats counts what it holds, or its definition is deleted.
//
// # Redis Cluster
//
// On a *redis.ClusterClient (New), or through Open of the URL of any of
// its nodes, every operation on one lock, and on several locks of one
// root, works as on one server: the whole conformance suite
// runs on a cluster of three primaries (TestCluster). Cluster runs no
// script over keys of several slots, so the store (a store.Sharder: its
// shards are the roots, Shard gives a name's) refuses, before any round
// trip and changing nothing, with a *store.ShardError (matching
// sleeplock.ErrUnsupported) that names two locks of different roots:
// an AcquireAll of locks of several roots; a lease of several roots
// (LeaseOf) released, kept, checked or guarded; a Guard whose Tx writes
// a key without the lock's KeyTag; an Apply (a store's Reconcile)
// of definitions of several roots (define them one by one, with Define);
// and every Apply with Prune, which reads the definitions of every root.
// It judges by root, not by slot, so that whether a call works never
// depends on how two roots happen to hash. Locks taken together must be
// named under one root ("turn/chat/42" and "turn/user/7"; package turns:
// WithChatFamily("turn/chat"), WithUserFamily("turn/user")), which puts
// all of them in one slot, on one primary.
//
// A grant or a wake-up is published to the waiter's node channel (see
// Waiting): Cluster sends PUBLISH to every node, whichever node the
// waiter's store subscribed on, in order for those published on one node;
// a lock's grants come from its slot's primary, and so do the
// announcements of its elections (Announce), so that an observer sees
// them in order. Check reads the settings of every
// primary. The library is loaded on every primary, and again when a
// primary answers that it lacks it (a node added, a slot moved to it):
// the call then runs again. Move a root's slot with all its keys in one
// MIGRATE (redis-cli --cluster reshard with --cluster-pipeline at least
// the slot's keys) or while its locks are idle: a script that runs while
// part of a root's keys have moved may fail partway. When a primary dies,
// the first call that cannot reach it has the client read the slots'
// primaries again (go-redis alone would wait for its
// ClusterStateReloadInterval, 60 s by default, as no MOVED comes from a
// dead node): calls reach the replica that took its place within seconds
// of the takeover (0.9 to 2.5 s in TestClusterFailover's runs). Fencing tokens hold
// across the promotion as with Sentinel (see Fencing tokens).
//
// # Waiting
//
// A waiter's place in a queue holds its whole request. The script that
// frees a slot grants it to the head waiter(s) that fit, in the same
// script, and publishes the grant to the waiter's node: each store
// subscribes to a channel of its own (P + "node:" + id). The grant is
// unclaimed until the waiter's check (one call, made when the message
// arrives) claims it and reads it: until then it lives as long as the
// waiter's node, and a call that needs the slot takes it back once the
// node stops counting as alive (the waiter TTL), so that a waiter whose
// process died or stopped just before its grant holds the slot for a
// second, not for its lease's TTL. A waiter that comes back after that
// finds no grant and queues again: it never returns a lease it does not
// hold. Waiters do not poll. A waiter checks again only when told to (the
// subscription was renewed after a reconnect, when a grant may have been
// lost), when a holder ahead of it becomes takeable (its expiry, or an
// unclaimed grant's node's: the waiter that becomes the head of a queue is
// told when, with no call of its own), or when the heartbeat finds that
// its node had been taken for dead. Each store beats four times per waiter TTL (WithWaiterTTL, 1s)
// under the roots where it has waiters; a heartbeat takes the waiters of
// nodes that stopped beating out of the queues, so the waiters of a dead
// process stop blocking others within the waiter TTL.
//
// # Fencing tokens
//
// A token is the server's clock in microseconds when it was drawn, raised
// past the last token drawn under the lock's root when two grants share a
// microsecond. Tokens grow with every grant and are never reused. They
// also grow across a restart that lost the data (no persistence) and
// across a failover to a replica that missed the last writes: the new
// primary's clock is past every token its old primary drew, as long as the
// servers' clocks differ by less than the time the failover takes and no
// clock is stepped back by more than that. docs/guarantees.md says what
// holds with each persistence setting.
//
// # Fenced writes
//
// Redis cannot join a transaction of the caller's: Guard (Lease.Guard)
// takes a *Tx, a batch of writes that it runs in the same script as the
// check that the lease is still held, or not at all.
//
// # Server settings
//
// Open (and Check) refuse a server whose maxmemory-policy is not
// noeviction, or that is a replica, and warn (Warnings) when it keeps
// nothing on disk.
package redisstore
