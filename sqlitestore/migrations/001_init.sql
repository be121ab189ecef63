-- sleeplock SQLite schema, version 1. Times are microseconds since the Unix
-- epoch on the host's clock; 0 means "never" (expires) or "not recorded".

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

-- One row per (lock, holder). pid, pstart and host name the holder's
-- process (its pid, its start time in clock ticks since boot, and the boot
-- and pid namespace it lives in), so that a process that died loses its
-- slots at once.
CREATE TABLE holders (
    lock     TEXT    NOT NULL,
    ref      TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    token    INTEGER NOT NULL,
    count    INTEGER NOT NULL,
    acquired INTEGER NOT NULL,
    renewed  INTEGER NOT NULL,  -- taken or last kept, dated back by ttl - hold
    expires  INTEGER NOT NULL,  -- 0: never
    ttl      INTEGER NOT NULL,  -- µs, 0: never expires
    hold     INTEGER NOT NULL,  -- µs, 0: the TTL
    pid      INTEGER NOT NULL,
    pstart   INTEGER NOT NULL,
    host     TEXT    NOT NULL,
    PRIMARY KEY (lock, ref)
) WITHOUT ROWID;

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

-- One row per (lock, waiter).
CREATE TABLE queue (
    lock   TEXT    NOT NULL,
    ticket INTEGER NOT NULL,
    PRIMARY KEY (lock, ticket)
) WITHOUT ROWID;
CREATE INDEX queue_ticket ON queue (ticket);
