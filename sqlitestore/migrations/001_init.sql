-- sleeplock SQLite schema, version 1. Times are microseconds since the Unix
-- epoch on the host's clock; 0 means "never" (expires) or "not recorded".
-- From the first release on, this file is never edited: a change of the
-- schema is a new numbered migration (see RELEASING.md).

-- Locks and families ("chat/*"), by name.
CREATE TABLE defs (
    name   TEXT    PRIMARY KEY,
    slots  INTEGER NOT NULL CHECK (slots > 0),
    family INTEGER NOT NULL
) WITHOUT ROWID;

-- Counters that only grow: 'token' (the last fencing token granted) and
-- 'seq' (the last event sequence number).
CREATE TABLE counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('token', 0), ('seq', 0);

-- One row per (lock, holder). A hold takes weight of its lock's slots.
-- pid, pstart and host name the holder's process (its pid, its start time
-- in clock ticks since boot, and the boot and pid namespace it lives in),
-- so that a process that died loses its slots at once; pgrp, when not 0,
-- is a process group that keeps them until it is gone too (a supervised
-- command's, WithProcessGroup).
CREATE TABLE holders (
    lock     TEXT    NOT NULL,
    ref      TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    token    INTEGER NOT NULL,
    count    INTEGER NOT NULL,
    weight   INTEGER NOT NULL DEFAULT 1,
    acquired INTEGER NOT NULL,
    renewed  INTEGER NOT NULL,  -- taken or last kept, dated back by ttl - hold
    expires  INTEGER NOT NULL,  -- 0: never
    ttl      INTEGER NOT NULL,  -- µs, 0: never expires
    hold     INTEGER NOT NULL,  -- µs, 0: the TTL
    pid      INTEGER NOT NULL,
    pstart   INTEGER NOT NULL,
    host     TEXT    NOT NULL,
    pgrp     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lock, ref)
) WITHOUT ROWID;

-- Holds that a caller other than their holder ended: released naming the
-- ref (why 'r'), released as stale ('s'), or their lock deleted with force
-- ('d'). The holder's process reads the rows after the last it read
-- whenever the file changes (PRAGMA data_version), and ends the hold's
-- lease at once rather than at its next renewal. id is never reused
-- (AUTOINCREMENT); the transaction that adds a row deletes those older
-- than a minute.
CREATE TABLE ended (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    lock  TEXT    NOT NULL,
    ref   TEXT    NOT NULL,
    token INTEGER NOT NULL,
    why   TEXT    NOT NULL,
    at    INTEGER NOT NULL
);

-- Callers waiting in a queue, in ticket order (AUTOINCREMENT: never
-- reused). A waiter keeps its row alive (alive) while it polls, and names
-- its process like a holder, so that the waiters of a dead process leave
-- the queue. owner is the store (one Open) that queued it.
CREATE TABLE waiters (
    ticket  INTEGER PRIMARY KEY AUTOINCREMENT,
    owner   TEXT    NOT NULL,
    ref     TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    locks   TEXT    NOT NULL,  -- JSON array, in the caller's order
    since   INTEGER NOT NULL,
    alive   INTEGER NOT NULL,
    pid     INTEGER NOT NULL,
    pstart  INTEGER NOT NULL,
    host    TEXT    NOT NULL
);
CREATE INDEX waiters_owner ON waiters (owner);

-- One row per (lock, waiter). A waiter asks weight of each lock it queues
-- for (-1: every slot, as many as the lock has when it is granted).
CREATE TABLE queue (
    lock   TEXT    NOT NULL,
    ticket INTEGER NOT NULL,
    weight INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (lock, ticket)
) WITHOUT ROWID;
CREATE INDEX queue_ticket ON queue (ticket);

-- Counters per definition (a lock, or a family with its members folded
-- in), kept by the transactions that grant, release and refuse, read by
-- Stats. w0..w11 and h0..h11 count waits and holds in the buckets of
-- store.HistogramBounds (w: only grants that waited; the others are
-- acquisitions - waited, in the first bucket).
CREATE TABLE stats (
    name         TEXT    PRIMARY KEY,
    acquisitions INTEGER NOT NULL DEFAULT 0,
    releases     INTEGER NOT NULL DEFAULT 0,
    refusals     INTEGER NOT NULL DEFAULT 0,
    expiries     INTEGER NOT NULL DEFAULT 0,
    losses       INTEGER NOT NULL DEFAULT 0,
    waited       INTEGER NOT NULL DEFAULT 0,
    wait_us      INTEGER NOT NULL DEFAULT 0,
    holds        INTEGER NOT NULL DEFAULT 0,
    hold_us      INTEGER NOT NULL DEFAULT 0,
    w0 INTEGER NOT NULL DEFAULT 0, w1 INTEGER NOT NULL DEFAULT 0, w2 INTEGER NOT NULL DEFAULT 0,
    w3 INTEGER NOT NULL DEFAULT 0, w4 INTEGER NOT NULL DEFAULT 0, w5 INTEGER NOT NULL DEFAULT 0,
    w6 INTEGER NOT NULL DEFAULT 0, w7 INTEGER NOT NULL DEFAULT 0, w8 INTEGER NOT NULL DEFAULT 0,
    w9 INTEGER NOT NULL DEFAULT 0, w10 INTEGER NOT NULL DEFAULT 0, w11 INTEGER NOT NULL DEFAULT 0,
    h0 INTEGER NOT NULL DEFAULT 0, h1 INTEGER NOT NULL DEFAULT 0, h2 INTEGER NOT NULL DEFAULT 0,
    h3 INTEGER NOT NULL DEFAULT 0, h4 INTEGER NOT NULL DEFAULT 0, h5 INTEGER NOT NULL DEFAULT 0,
    h6 INTEGER NOT NULL DEFAULT 0, h7 INTEGER NOT NULL DEFAULT 0, h8 INTEGER NOT NULL DEFAULT 0,
    h9 INTEGER NOT NULL DEFAULT 0, h10 INTEGER NOT NULL DEFAULT 0, h11 INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
