-- sleeplock schema, version 3: the single-lock hot paths as small
-- PL/pgSQL functions.
--
-- Versions 1 and 2 stay as they were released. Placeholders as in 002.
--
-- Why: the plain statements of version 2 (queries/acquire1.sql,
-- release1.sql) each carried their rare cases in the same plan (refusal,
-- the acquire()/release() fallbacks, the ordered definition lookup), and
-- PostgreSQL sets up and tears down every node of a plan at each
-- execution, run or not: about half of a grant's server time. A PL/pgSQL
-- function keeps a small cached plan per statement and runs only the
-- statements of the branch taken, so the common grant and release run a
-- few index lookups and the writes, and the rare cases cost only when
-- they happen. The data, the locking order and every rule are those of
-- version 2: a grant of a free lock creates the lock's row before it draws
-- its token (tokens grow per lock), Event.Seq is drawn while the lock's
-- row is held, a refusal writes nothing and waits on no row lock, a try
-- never jumps a queue. One difference to mind: each statement of a
-- PL/pgSQL function reads on a snapshot of its own (READ COMMITTED), so
-- what must agree (the counts of a refusal and the holder it names) is
-- read in one statement. acquire_one never answers 'raced', as
-- acquire1.sql of version 2 could.

-- The slots of the definition of a name: the first of p_pats (the name,
-- then its families, most specific first) that is defined; NULL when none
-- is. One index lookup per pattern tried.
CREATE OR REPLACE FUNCTION {{schema}}.slots_in(p_pats text[]) RETURNS integer
LANGUAGE plpgsql STABLE AS $sleeplock$
DECLARE
    v_pat   text;
    v_slots integer;
BEGIN
    FOREACH v_pat IN ARRAY p_pats LOOP
        SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_pat;
        IF FOUND THEN
            RETURN v_slots;
        END IF;
    END LOOP;
    RETURN NULL;
END
$sleeplock$;

-- Acquire one lock, without StaleAfter: TryAcquire and the first step of
-- Acquire. Result rows as acquire()'s, plus the event's Seq (0 for rows
-- that are no event).
--
--   - A free lock is granted slot 1 after two writes: the lock's row, then
--     the holder. Inserting the lock's row is what serialises the lock's
--     grants (acquire() and release_one() take the same row first) and,
--     when the row is new, what proves the lock free: every holder and
--     every waiter has its lock's row (version 2), so there is nothing to
--     read. The token is drawn only once the row is ours, so tokens grow
--     per lock.
--   - The row exists (held, queued, or slow-path work under way): a try
--     (p_wait false) on a lock full of unexpired holders with nobody queued
--     is refused on a plain read, naming the oldest unexpired holder. The
--     insert that found the row wrote nothing and waits on no row lock (a
--     unique check waits only for an insert or delete in flight).
--   - The row exists, nobody queues, the ref does not hold the lock and a
--     slot number is free (another slot of a multi-slot lock): it takes
--     the lock's row (FOR UPDATE), reads again and grants the lowest free
--     slot, drawing the token under the row.
--   - Everything else (re-entry, a takeover, a queue, waiting, a name
--     nothing defines, a slot taken meanwhile) is acquire()'s.
--
-- p_pats: the patterns of the name (see slots_in); p_lease: the lease in
-- µs (hold, or ttl); p_back: ttl - lease in µs (renewed is dated back by it).
CREATE OR REPLACE FUNCTION {{schema}}.acquire_one(
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
    p_back    bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint,
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now   timestamptz;
    v_slots integer := {{schema}}.slots_in(p_pats);
    v_exp   timestamptz;
    v_tok   bigint;
    r       record;
    f       record;
BEGIN
    IF v_slots IS NOT NULL THEN
        INSERT INTO {{schema}}.locks (name) VALUES (p_name) ON CONFLICT DO NOTHING;
        IF FOUND THEN
            -- A new row: nothing holds or queues. The holder's insert still
            -- checks (a holder made by version 1 may lack its row): on a
            -- conflict acquire() decides, under the row this has taken.
            v_now := clock_timestamp();
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
            INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold, op)
            VALUES (p_name, p_ref, p_kind, nextval({{tokens}}), 1, 1, v_now,
                    v_now - p_back * interval '1 microsecond', v_exp, p_ttl, p_hold, p_op)
            ON CONFLICT DO NOTHING
            RETURNING token INTO v_tok;
            IF v_tok IS NOT NULL THEN
                RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, 1, 0, p_ref, p_kind, v_tok,
                    {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                    nextval({{seqs}});
                RETURN;
            END IF;
        ELSIF NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
            v_now := clock_timestamp();
            -- One statement, so one snapshot: the counts and the oldest
            -- unexpired holder are of the same moment.
            SELECT c.n, c.live, c.mine, o.ref, o.kind, o.expires INTO r
              FROM (SELECT count(*)::int AS n,
                           (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > v_now))::int AS live,
                           coalesce(bool_or(h.ref = p_ref), false) AS mine
                      FROM {{schema}}.holders h WHERE h.lock = p_name) c
              LEFT JOIN LATERAL (
                    SELECT h.ref, h.kind, h.expires FROM {{schema}}.holders h
                     WHERE h.lock = p_name AND (h.expires IS NULL OR h.expires > v_now)
                     ORDER BY h.token LIMIT 1) o ON true;
            IF NOT p_wait AND NOT r.mine AND r.live >= v_slots THEN
                -- Refused on this read, with the oldest unexpired holder.
                RETURN QUERY SELECT 'refused'::text, 1, p_name, v_slots, r.n, 0, r.ref, r.kind, 0::bigint,
                    {{schema}}.micros(v_now), {{schema}}.micros(r.expires), 0::bigint, false, 0::bigint, 0::bigint,
                    0::bigint, 0::bigint;
                RETURN;
            END IF;
            IF NOT r.mine AND r.n < v_slots THEN
                -- A slot number is free (another slot of a multi-slot
                -- lock): take the lock's row, then decide again on fresh
                -- reads. A takeover, re-entry or a queue is acquire()'s.
                PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_name FOR UPDATE;
                IF FOUND AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
                    SELECT count(*)::int AS n, coalesce(bool_or(h.ref = p_ref), false) AS mine,
                           (SELECT s FROM generate_series(1, v_slots) s
                             WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders x WHERE x.lock = p_name AND x.slot = s)
                             ORDER BY s LIMIT 1) AS slot
                      INTO f
                      FROM {{schema}}.holders h WHERE h.lock = p_name;
                    IF NOT f.mine AND f.n < v_slots AND f.slot IS NOT NULL THEN
                        v_now := clock_timestamp();
                        v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
                        INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires,
                                                       ttl, hold, op)
                        VALUES (p_name, p_ref, p_kind, nextval({{tokens}}), f.slot, 1, v_now,
                                v_now - p_back * interval '1 microsecond', v_exp, p_ttl, p_hold, p_op)
                        ON CONFLICT DO NOTHING
                        RETURNING token INTO v_tok;
                        IF v_tok IS NOT NULL THEN
                            RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, f.n + 1, 0, p_ref, p_kind, v_tok,
                                {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl,
                                p_hold, nextval({{seqs}});
                            RETURN;
                        END IF;
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, 0::bigint,
                                  p_wttl, 0::bigint) a;
END
$sleeplock$;

-- Release one lock. When, once the lock's row is ours, the ref's hold is
-- the lock's only one, is not counted more than once and nobody queues, it
-- deletes the holder and the lock's row; everything else (other holders, a
-- queue, which it NOTIFYs, a counted hold, not held, a name nothing
-- defines) is release()'s. Result rows as release()'s plus the event's Seq.
-- With p_events the slots of the definition are read for the event.
--
-- The checks run after the row lock, each on a fresh snapshot (PL/pgSQL
-- in READ COMMITTED): a grant that committed while this waited is seen.
CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
                                                   p_pats text[])
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    r     record;
BEGIN
    PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_name FOR UPDATE;
    IF FOUND THEN
        -- No other holder or waiter can appear while the row is ours.
        DELETE FROM {{schema}}.holders h
         WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token) AND h.count <= 1
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders x WHERE x.lock = p_name AND x.ref <> p_ref)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name)
        RETURNING h.kind, h.token, h.acquired INTO r;
        IF FOUND THEN
            DELETE FROM {{schema}}.locks l WHERE l.name = p_name;
            v_now := clock_timestamp();
            RETURN QUERY SELECT 'released'::text, 1, p_name,
                CASE WHEN p_events THEN {{schema}}.slots_in(p_pats) ELSE 0 END, 0, 0, p_ref, r.kind, r.token,
                {{schema}}.micros(v_now), {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), nextval({{seqs}});
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
        SELECT b.*, CASE WHEN b.r_ev = 'released' THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.release(ARRAY[p_name], ARRAY[p_token], p_ref, NULL::bigint, p_events) b;
END
$sleeplock$;
