-- sleeplock schema, version 7: every reader and renewer of several locks'
-- holds finds a holder in its lock's row.
--
-- Versions 1 to 6 stay as they were. Placeholders as in 002.
--
-- Why: version 6 keeps a lock's first holder in the lock's row, and its
-- statements for one lock (queries/held.sql, keep_one()) look there and in
-- the holder rows. Version 1's held() and keep(), which a store sends for a
-- handle of several locks (a LeaseOf of a ref that took two locks with two
-- single-lock acquisitions), still read the holder rows alone: Held said
-- not held and Keep said lost while the ref held both. And version 2's
-- release() took a single lock's row without spilling it, so a ReleaseStale
-- of one lock sent by a process of version 5, still running while the
-- schema is upgraded, did not release a stale holder kept in the row.
--
-- What changes:
--   - held() reads the view holding: one snapshot (the function is
--     STABLE), so a holder moved from its lock's row to a holder row
--     meanwhile is seen in one place or the other.
--   - keep() finds and locks each hold in its lock's row (a spill waits
--     for this statement to end), else in its holder row; all or none, as
--     before; then renews each through keep_one().
--   - release() spills the row of a single lock first (release_rows() is
--     version 2's release(), renamed).
--   - acquire_slow() answers 'cancelled' to an acquisition that undo()
--     already abandoned (its tombstone in cancelled), as acquire() answers
--     a waiter's check: a statement that reached the server only after the
--     undo that was to clean up after it must not grant a slot nobody will
--     release (acquire_rows() is version 6's acquire_slow(), renamed). The
--     hot UPDATE (queries/acquire1.sql) needs no such check: undo() spills
--     the lock's row, which that UPDATE then no longer grants.

CREATE OR REPLACE FUNCTION {{schema}}.held(p_names text[], p_tokens bigint[], p_ref text)
RETURNS TABLE (r_held boolean, r_now bigint, r_renewed bigint, r_expires bigint)
LANGUAGE plpgsql STABLE AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_ren   timestamptz;
    v_exp   timestamptz;
    v_first timestamptz;
    v_min   timestamptz;
    i       integer;
BEGIN
    FOR i IN 1 .. cardinality(p_names) LOOP
        SELECT h.renewed, h.expires INTO v_ren, v_exp FROM {{schema}}.holding h
         WHERE h.lock = p_names[i] AND h.ref = p_ref AND (p_tokens[i] = 0 OR h.token = p_tokens[i])
         LIMIT 1;
        IF NOT FOUND THEN
            RETURN QUERY SELECT false, {{schema}}.micros(clock_timestamp()), 0::bigint, 0::bigint;
            RETURN;
        END IF;
        IF i = 1 THEN
            v_first := v_ren;
        END IF;
        IF v_exp IS NOT NULL AND (v_min IS NULL OR v_exp < v_min) THEN
            v_min := v_exp;
        END IF;
    END LOOP;
    RETURN QUERY SELECT true, {{schema}}.micros(clock_timestamp()), {{schema}}.micros(v_first), {{schema}}.micros(v_min);
END
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.keep(p_names text[], p_tokens bigint[], p_ref text, p_ttl bigint, p_hold bigint)
RETURNS TABLE (r_ok boolean, r_now bigint, r_expires bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_lease bigint := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;
    v_tok   bigint;
    k       record;
    v_now   bigint;
    v_exp   bigint;
    i       integer;
BEGIN
    -- Find and lock every hold first, all or none: in its lock's row (a
    -- spill, which takes the row FOR UPDATE, then waits until this
    -- statement ends), or else in a holder row (a spill that ran first
    -- has moved it there).
    FOR i IN 1 .. cardinality(p_names) LOOP
        v_tok := p_tokens[i];
        PERFORM 1 FROM {{schema}}.locks l
          WHERE l.name = p_names[i] AND l.fast AND l.ref = p_ref AND (v_tok = 0 OR l.token = v_tok)
            FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            PERFORM 1 FROM {{schema}}.holders h
              WHERE h.lock = p_names[i] AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok)
                FOR NO KEY UPDATE;
            IF NOT FOUND THEN
                RETURN QUERY SELECT false, {{schema}}.micros(clock_timestamp()), 0::bigint;
                RETURN;
            END IF;
        END IF;
    END LOOP;
    -- Then renew each where it is, as a Keep of one lock does.
    FOR i IN 1 .. cardinality(p_names) LOOP
        SELECT * INTO k FROM {{schema}}.keep_one(p_names[i], p_tokens[i], p_ref, p_ttl, p_hold, v_lease,
                                                  p_ttl - v_lease);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'sleeplock: keep(): the hold of % locked above is gone', p_names[i];
        END IF;
        v_now := coalesce(v_now, k.r_now);
        IF k.r_expires IS NOT NULL AND (v_exp IS NULL OR k.r_expires < v_exp) THEN
            v_exp := k.r_expires;
        END IF;
    END LOOP;
    RETURN QUERY SELECT true, v_now, v_exp;
END
$sleeplock$;

ALTER FUNCTION {{schema}}.release(text[], bigint[], text, bigint, boolean) RENAME TO release_rows;

-- Version 2's release() (now release_rows(), see there), after spilling
-- the row of a single lock; several locks' rows are spilled by
-- lock_existing(), which release_rows() calls.
CREATE OR REPLACE FUNCTION {{schema}}.release(p_names text[], p_tokens bigint[], p_ref text, p_stale bigint,
                                               p_events boolean)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint)
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    IF cardinality(p_names) = 1 THEN
        PERFORM {{schema}}.spill(p_names[1]);
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.release_rows(p_names, p_tokens, p_ref, p_stale, p_events);
END
$sleeplock$;

ALTER FUNCTION {{schema}}.acquire_slow(text, text, text, bigint, bigint, boolean, boolean, bigint, bigint, text[],
                                       bigint, bigint, bigint) RENAME TO acquire_rows;

-- Version 6's acquire_slow() (now acquire_rows(), see there), unless the
-- acquisition was abandoned: its undo() left a tombstone, and nothing is
-- granted or queued for it.
CREATE OR REPLACE FUNCTION {{schema}}.acquire_slow(
    p_name    text,
    p_ref     text,
    p_kind    text,
    p_ttl     bigint,
    p_hold    bigint,
    p_counted boolean,
    p_wait    boolean,
    p_op      bigint,
    p_wttl    bigint,
    p_pats    text[],
    p_lease   bigint,
    p_back    bigint,
    p_node    bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint,
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        RETURN QUERY SELECT 'cancelled'::text, 1, p_name, 0, 0, 0, p_ref, p_kind, 0::bigint,
            {{schema}}.micros(clock_timestamp()), 0::bigint, 0::bigint, false, 0::bigint, 0::bigint, 0::bigint,
            0::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.acquire_rows(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op,
                                                        p_wttl, p_pats, p_lease, p_back, p_node);
END
$sleeplock$;
