-- sleeplock SQLite schema, version 3: counters per definition (a lock, or
-- a family with its members folded in), kept by the transactions that
-- grant, release and refuse, read by Stats. Times are microseconds.
-- w0..w11 and h0..h11 count waits and holds in the buckets of
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
