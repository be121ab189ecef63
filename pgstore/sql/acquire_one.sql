-- Acquisition of one lock: acquire_one() and the steps it takes, each a
-- function of its own. Functions of sql/ are applied at every Migrate with
-- CREATE OR REPLACE; each is defined once, in one of these files.
-- {{schema}} is the quoted schema, {{tokens}}, {{tickets}} and {{seqs}}
-- the sequences as regclass literals. A signature is a contract
-- (docs/schema.md): change one by adding a new name.
--
-- Every function here returns acquire_row, as acquire() does, with the
-- event's Seq and r_fast, whether the lock's row is fast after a grant
-- (the store's hint); no row means "not settled here, go on".

-- acquire_one: a request for one lock without StaleAfter, in every case
-- (the store sends it when the bare UPDATE of acquire_fast.sql granted
-- nothing, or first for a lock it last saw slow). Cheapest case first:
--   1. A lock of several slots, at most 1,024, whose row is fast (or
--      new): a free slot of the row's arrays, under the row
--      (grant_in_row()).
--   2. A caller that will wait takes the lock's row first. A slow row with
--      a queue can grant nobody but by acquire()'s rule: 3–5 are skipped.
--   3. A lock with no row: its row is made fast, holding the caller; a
--      fast free row is granted as acquire_fast.sql grants it, and a
--      weighted request a fast row with no holder (scalar mode, or slot
--      mode with every slot free) as acquire_weighted.sql does
--      (grant_in_row()).
--   4. A try of a lock full of unexpired holders, nobody queued: refused
--      on a plain read of holding (no write, no row lock); or
--   5. another slot number of a held lock, under the row, spilled to
--      holder rows (refuse_or_take_free_slot()).
--   6. A caller that will wait, of a lock held or queued: queued under the
--      row, slow, when its live holders and the waiters queued (each asks
--      one slot at least) leave fewer than the slots it asks and its ref
--      holds no slot of it (acquire()'s rule, on a few reads: enqueue()).
--   7. Everything else (re-entry, takeover, a grant to a waiter, dead
--      waiters): check_one(), which reaps and runs acquire().
-- A weight (p_weight k > 1, or -1: every slot) takes k slots as one hold:
-- in the lock's row in scalar mode when the row has no holder (step 3,
-- locks.weight and wacqs), else in a holder row (step 5 spills a fast row
-- first); step 1, which grants a slot of the row's arrays, is for holds
-- of one slot. k larger than the lock's slots is refused at once
-- ('too_heavy'), unless the ref holds the lock (re-entry, at the weight it
-- holds). Free slots are the slots less the weights of the holders.
CREATE OR REPLACE FUNCTION {{schema}}.acquire_one(p_name text, p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_wait boolean, p_op bigint, p_wttl bigint, p_pats text[], p_lease bigint, p_back bigint,
    p_node bigint, p_weight integer, p_sample boolean)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_slots  integer := {{schema}}.slots_in(p_pats);
    v_need   integer := {{schema}}.need(p_weight, v_slots);
    v_slow   boolean := false; -- the row is ours (step 2) and not fast
    v_queued boolean := false; -- and it has a queue
    v_count  integer; -- its queue's count, when every waiter is its node's
    v_now    timestamptz;
    f        record;
    o        {{schema}}.acquire_row;
BEGIN
    IF v_need > v_slots AND NOT EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = p_name AND h.ref = p_ref) THEN
        RETURN QUERY SELECT * FROM {{schema}}.answer_stop('too_heavy', ARRAY[p_name], 1, 0, v_slots, p_weight);
        RETURN;
    END IF;
    -- 1. (a lock of at most 1,024 slots: see grant_in_row())
    IF v_slots > 1 AND v_slots <= 1024 AND v_need = 1 AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        RETURN QUERY SELECT * FROM {{schema}}.grant_in_row(p_name, p_ref, p_kind, p_ttl, p_hold, p_op, p_pats, p_lease,
                                                           p_back, v_slots, p_weight, true);
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    -- 2. (a slow row taken here needs no spill())
    IF p_wait THEN
        SELECT NOT x.fast, NOT x.fast AND x.queued > 0, CASE WHEN x.unowned = 0 THEN x.queued END
          INTO v_slow, v_queued, v_count FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
        v_slow := coalesce(v_slow, false); v_queued := coalesce(v_queued, false);
    END IF;
    -- Checked after the row is ours: the tombstone of an undo() that had
    -- the row before us (undo() takes it) is seen now.
    IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        RETURN QUERY SELECT * FROM {{schema}}.answer_stop('cancelled', ARRAY[p_name], 1, 0, 0, p_weight);
        RETURN;
    END IF;

    IF v_slots IS NOT NULL AND NOT v_queued THEN
        -- 3. (its 'notfound' included)
        RETURN QUERY SELECT * FROM {{schema}}.grant_in_row(p_name, p_ref, p_kind, p_ttl, p_hold, p_op, p_pats, p_lease,
                                                           p_back, v_slots, p_weight, false);
        IF FOUND THEN
            RETURN;
        END IF;
        IF NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
            -- 4. and 5.
            RETURN QUERY SELECT * FROM {{schema}}.refuse_or_take_free_slot(p_name, p_ref, p_kind, p_ttl, p_hold, p_wait,
                p_op, p_lease, p_back, v_slots, v_need, p_weight, v_slow);
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
    END IF;
    -- 6.
    IF p_wait AND v_slots IS NOT NULL
       AND (v_slow OR ({{schema}}.spill(p_name) AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op))) THEN
        v_now := clock_timestamp();
        SELECT coalesce(sum(h.weight), 0)::int AS n,
               coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
               coalesce(bool_or(h.ref = p_ref), false) AS mine,
               -- (the row's count while no node is stale, as waiter_counts() reads it)
               coalesce(CASE WHEN NOT {{schema}}.nodes_stale(v_now) THEN v_count END,
                        ({{schema}}.waiter_counts(p_name, v_now)).r_live) AS waiting
          INTO f FROM {{schema}}.holders h WHERE h.lock = p_name;
        IF NOT f.mine AND f.waiting + v_need > v_slots - f.live THEN
            RETURN QUERY SELECT * FROM {{schema}}.enqueue(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_op,
                p_wttl, p_node, ARRAY[p_weight], v_now, ARRAY[v_slots], ARRAY[f.n], ARRAY[f.waiting]);
            RETURN;
        END IF;
    END IF;
    -- 7.
    FOR o IN SELECT * FROM {{schema}}.check_one(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, 0,
                                                p_wttl, 0, p_node, false, ARRAY[p_weight], p_sample) LOOP
        o.r_fast := o.r_ev = 'granted' AND o.r_running = 1 AND coalesce(v_slots, 1) <= 1;
        RETURN NEXT o;
    END LOOP;
END
$sleeplock$;

-- grant_in_row: steps 1 and 3 of acquire_one(), a grant of a lock whose
-- whole state stays in its row, of weight p_weight (need(), at most
-- p_slots). A read first: a try of a full lock takes no row lock, and an
-- insert that meets the row would wait for a transaction changing it. A
-- missing row is made (make_row()); made here, nothing holds or queues: it
-- is ours.
-- p_slot, step 1, a request of one slot of a lock of 2 to 1,024 slots: a
-- free slot of its fast row's arrays, under the row (a new row is made
-- fast; a free row in scalar mode is turned to slot mode first). Only up
-- to 1,024 slots (acquire_one() calls it for no other): the arrays have
-- one element per slot, and every statement that reads or writes them
-- (this one, acquire_slot.sql, release_slot.sql, the view holding,
-- spill()) costs time in proportion to their length; on a lock of
-- 1,000,000 slots (`sleeplock run -s`) State took 1.7 s, a grant 18 ms. A
-- wider lock keeps its holders in holder rows (one holder: the row's, in
-- scalar mode), which cost in proportion to the holders. Up to 1,024 slots
-- the arrays cost less than the holder rows (bench/README).
-- Else, step 3, the caller as the row's scalar holder (locks.weight and
-- wacqs): of a new row, of any weight; of a fast free row, weight 1, as
-- acquire_fast.sql grants it; of a fast row with no holder (in scalar or
-- slot mode), a weighted one, as acquire_weighted.sql does. A row deleted
-- meanwhile: 'notfound'.
CREATE OR REPLACE FUNCTION {{schema}}.grant_in_row(p_name text, p_ref text, p_kind text, p_ttl bigint,
    p_hold bigint, p_op bigint, p_pats text[], p_lease bigint, p_back bigint, p_slots integer, p_weight integer,
    p_slot boolean)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_slots integer := p_slots; -- (step 1: read again to turn the row to slot mode)
    v_need  integer := {{schema}}.need(p_weight, p_slots);
    v_new   boolean := false;
    v_turn  boolean;
    v_now   timestamptz;
    v_exp   timestamptz;
    v_tok   bigint;
    v_k     integer;
    v_run   integer := v_need;
    l       record;
BEGIN
    SELECT x.fast, x.ref, x.xref INTO l FROM {{schema}}.locks x WHERE x.name = p_name;
    IF NOT FOUND THEN
        v_new := {{schema}}.make_row(p_name);
        IF v_new IS NULL THEN -- deleted meanwhile (step 1: step 3 finds it)
            RETURN QUERY SELECT * FROM {{schema}}.answer_stop('notfound', ARRAY[p_name], 1, 0, 0, p_weight)
                          WHERE NOT p_slot;
            RETURN;
        END IF;
        v_new := v_new AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name);
        IF v_new AND p_slot THEN
            UPDATE {{schema}}.locks x SET fast = true, freed = clock_timestamp() WHERE x.name = p_name
            RETURNING x.fast, x.ref, x.xref INTO l;
        END IF;
    END IF;
    IF NOT p_slot THEN
        IF NOT (v_new OR coalesce(l.fast AND (l.ref IS NULL OR v_need > 1
                                              AND cardinality(array_remove(l.xref, NULL)) = 0), false)) THEN
            RETURN;
        END IF;
        v_now := clock_timestamp();
        v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
        UPDATE {{schema}}.locks x
           SET fast = true, ref = p_ref, kind = p_kind, token = {{schema}}.next_token(), acquired = v_now,
               renewed = v_now - p_back * interval '1 microsecond', expires = v_exp, ttl = p_ttl,
               hold = p_hold, op = p_op, acqs = x.acqs + 1, weight = v_need, wacqs = x.acqs + 1,
               xref = NULL, xkind = NULL, xtoken = NULL, xacquired = NULL, xrenewed = NULL, xexpires = NULL,
               xttl = NULL, xhold = NULL, xop = NULL
         WHERE x.name = p_name AND v_need <= v_slots
           AND (v_new OR x.fast AND (x.ref IS NULL OR v_need > 1 AND cardinality(array_remove(x.xref, NULL)) = 0))
        RETURNING x.token INTO v_tok;
    ELSE
        -- A free row in scalar mode turns to slot mode with the lock's
        -- slots as a change of definition in flight leaves them (see
        -- defs_key(); taken before the row, as resize() and define() take
        -- rows after it).
        v_turn := coalesce(l.fast AND l.xref IS NULL AND l.ref IS NULL, false);
        IF v_turn THEN
            PERFORM pg_advisory_xact_lock_shared({{schema}}.defs_key());
            v_slots := {{schema}}.slots_in(p_pats);
        END IF;
        IF (l.fast AND ((l.xref IS NULL AND l.ref IS NULL)
                        OR (l.xref IS NOT NULL AND array_position(l.xref, NULL) IS NOT NULL
                            AND array_position(l.xref, p_ref) IS NULL))) IS NOT TRUE THEN
            RETURN; -- full, slow, or the ref holds a slot
        END IF;
        -- Take the row, then decide again on what it holds now.
        SELECT x.fast, x.ref, x.xref INTO l FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
        IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
            RETURN;
        END IF;
        v_now := clock_timestamp();
        v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
        IF v_turn AND l.fast AND l.xref IS NULL AND l.ref IS NULL AND v_slots > 1 AND v_slots <= 1024 THEN
            -- Free, in scalar mode: to slot mode.
            UPDATE {{schema}}.locks x
               SET ref = '', xref = a.t, xkind = a.t, xtoken = a.b, xacquired = a.ts, xrenewed = a.ts, xexpires = a.ts,
                   xttl = a.b, xhold = a.b, xop = a.b
              FROM (SELECT array_fill(NULL::text, ARRAY[v_slots]) AS t, array_fill(NULL::bigint, ARRAY[v_slots]) AS b,
                           array_fill(NULL::timestamptz, ARRAY[v_slots]) AS ts) a
             WHERE x.name = p_name;
            l.xref := array_fill(NULL::text, ARRAY[v_slots]);
        END IF;
        v_k := array_position(l.xref, NULL);
        IF l.fast AND cardinality(l.xref) = v_slots AND v_k IS NOT NULL AND array_position(l.xref, p_ref) IS NULL THEN
            UPDATE {{schema}}.locks x
               SET xref[v_k] = p_ref, xkind[v_k] = p_kind, xtoken[v_k] = {{schema}}.next_token(),
                   xacquired[v_k] = v_now, xrenewed[v_k] = v_now - p_back * interval '1 microsecond',
                   xexpires[v_k] = v_exp, xttl[v_k] = p_ttl, xhold[v_k] = p_hold, xop[v_k] = p_op,
                   acqs = x.acqs + 1
             WHERE x.name = p_name
            RETURNING x.xtoken[v_k], cardinality(array_remove(x.xref, NULL)) INTO v_tok, v_run;
        END IF;
    END IF;
    IF v_tok IS NOT NULL THEN
        RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, v_run, 0, p_ref, p_kind, v_tok,
            {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
            v_need, nextval({{seqs}}), p_slot OR v_slots <= 1 OR v_need > 1;
    END IF;
END
$sleeplock$;

-- refuse_or_take_free_slot: steps 4 and 5 of acquire_one(), for a lock
-- with nobody queued. 4: a try (not p_wait) of a lock whose live holders
-- leave fewer than p_need slots is refused on one read of holding (one
-- statement, so one snapshot: the counts and the oldest unexpired holder
-- are of the same moment, wherever the holders are; no write, no row
-- lock). 5: when a slot number is free (the lock's row free, or another
-- slot of a multi-slot lock), the row is taken (spilled, unless p_slow:
-- the caller holds it already, slow) and, decided again on fresh reads of
-- the holder rows, the caller gets a holder row of p_need slots, as
-- acquire() grants one (grant_holds()).
CREATE OR REPLACE FUNCTION {{schema}}.refuse_or_take_free_slot(p_name text, p_ref text, p_kind text, p_ttl bigint,
    p_hold bigint, p_wait boolean, p_op bigint, p_lease bigint, p_back bigint, p_slots integer, p_need integer,
    p_weight integer, p_slow boolean)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    r     record;
    f     record;
    o     {{schema}}.acquire_row;
BEGIN
    SELECT c.n, c.live, c.mine, o.ref, o.kind, o.expires INTO r
      FROM (SELECT coalesce(sum(h.weight), 0)::int AS n,
                   coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine
              FROM {{schema}}.holding h WHERE h.lock = p_name) c
      LEFT JOIN LATERAL (
            SELECT h.ref, h.kind, h.expires FROM {{schema}}.holding h
             WHERE h.lock = p_name AND (h.expires IS NULL OR h.expires > v_now)
             ORDER BY h.token LIMIT 1) o ON true;
    IF NOT p_wait AND NOT r.mine AND r.live + p_need > p_slots AND NOT {{schema}}.nodes_stale(v_now) THEN
        -- r_dur of a refusal: the slots free (BusyError.Free).
        RETURN QUERY SELECT 'refused'::text, 1, p_name, p_slots, r.n, 0, r.ref, r.kind, 0::bigint,
            {{schema}}.micros(v_now), {{schema}}.micros(r.expires), (p_slots - r.live)::bigint, false, 0::bigint, 0::bigint,
            0::bigint, p_weight, 0::bigint, false;
        RETURN;
    END IF;
    IF r.mine OR r.n + p_need > p_slots THEN
        RETURN;
    END IF;
    IF NOT (p_slow OR {{schema}}.spill(p_name)) OR EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
        RETURN;
    END IF;
    SELECT coalesce(sum(h.weight), 0)::int AS n, coalesce(bool_or(h.ref = p_ref), false) AS mine INTO f
      FROM {{schema}}.holders h WHERE h.lock = p_name;
    IF f.mine OR f.n + p_need > p_slots THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    FOR o IN SELECT * FROM {{schema}}.grant_holds(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, false, p_op, 0, v_now,
            NULL, v_now - p_back * interval '1 microsecond',
            CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END,
            ARRAY[p_slots], ARRAY[p_need], ARRAY[f.n], ARRAY[false], ARRAY[0]) LOOP
        EXIT WHEN o.r_ev = 'raced'; -- no slot number free after all: not settled here
        o.r_fast := f.n = 0 AND p_slots <= 1;
        RETURN NEXT o;
    END LOOP;
END
$sleeplock$;
