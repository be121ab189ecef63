-- sleeplock schema, version 1: tables, sequences, indexes and views.
--
-- A released migration is never edited (migrations.sum holds its
-- checksum); a change of tables is a new numbered file. Functions live in
-- pgstore/sql/ and are applied at every Migrate.
--
-- {{schema}} is replaced by the quoted schema name and {{unlogged}} by
-- UNLOGGED (pgstore.WithUnlogged) or nothing.
--
-- Weights: a hold takes weight of its lock's slots; a waiter asks weight
-- of each lock it queues for (-1: every slot, as many as the lock has when
-- it is granted). A weighted hold lives in a holder row, or as the one
-- holder of a fast row in scalar mode that it found entirely free
-- (queries/acquire_weighted.sql); a slot of slot mode is of weight 1.

-- Definitions: a lock, or a family ("chat/*") whose members ("chat/42")
-- exist once used.
CREATE TABLE {{schema}}.defs (
    name    text        PRIMARY KEY,
    slots   integer     NOT NULL CHECK (slots > 0),
    family  boolean     NOT NULL,
    created timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Counters folded in from the rows of locks the sweep deleted (see
    -- locks below; stats() adds the two).
    acqs    bigint      NOT NULL DEFAULT 0,
    rels    bigint      NOT NULL DEFAULT 0,
    exps    bigint      NOT NULL DEFAULT 0,
    losses  bigint      NOT NULL DEFAULT 0,
    waited  bigint      NOT NULL DEFAULT 0,
    wait_us bigint      NOT NULL DEFAULT 0,
    wb      bigint[],
    holds   bigint      NOT NULL DEFAULT 0,
    hold_us bigint      NOT NULL DEFAULT 0,
    hb      bigint[]
);

-- Fencing tokens, queue tickets and event numbers (Event.Seq): never
-- reused, never cycled. Sequences are WAL-logged also in UNLOGGED mode, so
-- tokens only grow.
CREATE SEQUENCE {{schema}}.tokens AS bigint NO CYCLE;
CREATE SEQUENCE {{schema}}.tickets AS bigint NO CYCLE;
CREATE SEQUENCE {{schema}}.seqs AS bigint NO CYCLE;

-- One row per lock in use. Taking it (FOR UPDATE) serialises every grant
-- of the lock, so tokens and Seq grow per lock.
--
-- A fast row holds the lock's whole state: no holder row, no queue row.
--   * scalar mode (xref NULL): its one holder, if any, in ref … op (ref
--     NULL: free since freed);
--   * slot mode (a lock of several slots): element i of the arrays x… is
--     slot i (xref[i] NULL: free), and ref is '' so that the scalar
--     statements (ref IS NULL, ref = $ref) never match the row.
-- A row that is not fast keeps its holders in holders and its waiters in
-- queue; spill() turns a fast row into that. queued and unowned count its
-- queue rows, and those whose waiter has no node (trigger track_queue_counts).
-- fillfactor 50 and no index on a changing column: grants and releases
-- are HOT updates.
--
-- Counters (Stats), bumped by the statements that grant and end holds of
-- the lock, in the UPDATE of this row they already send or, on the slow
-- paths, by tally(); folded into the definition's row when the row is
-- deleted (trigger locks_fold): grants (acqs), holds released (rels),
-- taken over expired (exps), ended by another's hand (losses); waits of
-- grants that queued (waited, wait_us, wb) and holds timed at their end
-- (holds, hold_us, hb). wb[i] and hb[i] count the durations of bucket i
-- (bump()) of store.HistogramBounds; NULL or a missing element is 0.
CREATE {{unlogged}} TABLE {{schema}}.locks (
    name      text PRIMARY KEY,
    queued    integer NOT NULL DEFAULT 0,
    unowned   integer NOT NULL DEFAULT 0,
    fast      boolean NOT NULL DEFAULT false,
    ref       text,
    kind      text,
    token     bigint,
    acquired  timestamptz,
    renewed   timestamptz,
    expires   timestamptz,
    ttl       bigint,
    hold      bigint,
    op        bigint,
    freed     timestamptz,
    xref      text[],
    xkind     text[],
    xtoken    bigint[],
    xacquired timestamptz[],
    xrenewed  timestamptz[],
    xexpires  timestamptz[],
    xttl      bigint[],
    xhold     bigint[],
    xop       bigint[],
    acqs      bigint NOT NULL DEFAULT 0,
    rels      bigint NOT NULL DEFAULT 0,
    exps      bigint NOT NULL DEFAULT 0,
    losses    bigint NOT NULL DEFAULT 0,
    waited    bigint NOT NULL DEFAULT 0,
    wait_us   bigint NOT NULL DEFAULT 0,
    wb        bigint[],
    holds     bigint NOT NULL DEFAULT 0,
    hold_us   bigint NOT NULL DEFAULT 0,
    hb        bigint[],
    -- The weight of the holder of the row in scalar mode: weight, granted
    -- with wacqs = the row's acqs after that grant. Every grant in the row
    -- counts in acqs, also those of the weight-1 statements, which do not
    -- write these columns (and so cost no more than before weights), so
    -- weight is that holder's only while acqs = wacqs, and a weight-1
    -- holder's is 1 with no reset when a weighted holder is released.
    weight    integer NOT NULL DEFAULT 1,
    wacqs     bigint
) WITH (fillfactor = 50);

-- One row per (lock, holder) of a lock whose row is not fast.
CREATE {{unlogged}} TABLE {{schema}}.holders (
    lock     text        NOT NULL,
    ref      text        NOT NULL,
    kind     text        NOT NULL DEFAULT '',
    token    bigint      NOT NULL,
    slot     integer     NOT NULL,   -- 1..slots, unique per lock
    count    integer     NOT NULL DEFAULT 1,
    acquired timestamptz NOT NULL,
    renewed  timestamptz NOT NULL,
    expires  timestamptz,            -- NULL: never
    ttl      bigint      NOT NULL,   -- microseconds, 0: never expires
    hold     bigint      NOT NULL,   -- microseconds, 0: the TTL
    op       bigint,                 -- the acquisition that made (or last counted) it
    handed   bigint[],               -- a release granted it to a waiter: the grant's event
    node     bigint,                 -- that waiter's node, until the node confirms it
    weight   integer     NOT NULL DEFAULT 1, -- the slots the hold takes
    PRIMARY KEY (lock, ref),
    UNIQUE (lock, slot)
);

-- Waiting callers, in ticket order, each with its whole request (a release
-- grants it on the waiter's behalf). A waiter of one lock has a node and
-- expires = node_lease_sentinel(): its lease is its node's row. A waiter
-- of several locks keeps a lease of its own (expires, wttl), renewed by
-- its store.
CREATE {{unlogged}} TABLE {{schema}}.waiters (
    ticket  bigint      PRIMARY KEY,
    op      bigint      NOT NULL,
    ref     text        NOT NULL,
    kind    text        NOT NULL DEFAULT '',
    locks   text[]      NOT NULL,    -- in the caller's order
    ttl     bigint      NOT NULL,
    hold    bigint      NOT NULL,
    counted boolean     NOT NULL,
    since   timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    wttl    bigint,
    node    bigint
) WITH (fillfactor = 50);
CREATE INDEX waiters_op ON {{schema}}.waiters (op);

-- One row per (lock, waiter); own: the waiter's lease is its node's.
CREATE {{unlogged}} TABLE {{schema}}.queue (
    lock   text    NOT NULL,
    ticket bigint  NOT NULL,
    own    boolean NOT NULL DEFAULT false,
    weight integer NOT NULL DEFAULT 1,   -- the slots asked, -1: every slot
    PRIMARY KEY (lock, ticket)
);
CREATE INDEX queue_ticket ON {{schema}}.queue (ticket);

-- Acquisitions given up by their callers (context ended, connection lost):
-- a statement of theirs still running must not grant. Swept after an hour.
CREATE {{unlogged}} TABLE {{schema}}.cancelled (
    op bigint      PRIMARY KEY,
    at timestamptz NOT NULL
);

-- One row per store that has waiters: the lease of its waiters of one
-- lock, renewed by its heartbeat.
CREATE {{unlogged}} TABLE {{schema}}.nodes (
    id      bigint      PRIMARY KEY,
    expires timestamptz NOT NULL,
    wttl    bigint      NOT NULL
) WITH (fillfactor = 50);

-- Every holder, wherever it is: holder rows, the holder of a fast row in
-- scalar mode, and the slots of a fast row in slot mode. Readers that take
-- no row lock (a refused try) read this.
CREATE VIEW {{schema}}.holding AS
SELECT h.lock, h.ref, h.kind, h.token, h.slot, h.count, h.acquired, h.renewed, h.expires, h.ttl, h.hold, h.op, h.weight
  FROM {{schema}}.holders h
UNION ALL
SELECT l.name, l.ref, l.kind, l.token, 1, 1, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op,
       CASE WHEN l.wacqs = l.acqs THEN l.weight ELSE 1 END
  FROM {{schema}}.locks l
 WHERE l.fast AND l.ref IS NOT NULL AND l.xref IS NULL
UNION ALL
SELECT l.name, s.ref, s.kind, s.token, s.slot::integer, 1, s.acquired, s.renewed, s.expires, s.ttl, s.hold, s.op, 1
  FROM {{schema}}.locks l
 CROSS JOIN LATERAL unnest(l.xref, l.xkind, l.xtoken, l.xacquired, l.xrenewed, l.xexpires, l.xttl, l.xhold, l.xop)
       WITH ORDINALITY s(ref, kind, token, acquired, renewed, expires, ttl, hold, op, slot)
 WHERE l.fast AND l.xref IS NOT NULL AND s.ref IS NOT NULL;

-- The rows the functions of sql/ answer with: an acquisition, of every
-- function of acquire.sql and acquire_one.sql (acquire_row: r_seq is the
-- event's Seq, drawn where a row granted, expired or queued is made;
-- r_fast whether the lock's row is fast after a grant, acquire_one()'s
-- hint); a release, of every function of release.sql that answers one
-- (release_row, r_seq its event's Seq). docs/schema.md says what each
-- column means.
CREATE TYPE {{schema}}.acquire_row AS (r_ev text, r_idx integer, r_lock text, r_slots integer,
    r_running integer, r_waiting integer, r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint,
    r_dur bigint, r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_weight integer, r_seq bigint,
    r_fast boolean);
CREATE TYPE {{schema}}.release_row AS (r_ev text, r_idx integer, r_lock text, r_slots integer,
    r_running integer, r_waiting integer, r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint,
    r_weight integer, r_seq bigint);
