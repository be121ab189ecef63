-- Acquisition. Functions of sql/ are applied at every Migrate with CREATE
-- OR REPLACE; each is defined once, in one of these files. {{schema}} is
-- the quoted schema, {{tokens}}, {{tickets}} and {{seqs}} the sequences
-- as regclass literals, {{channel}} the NOTIFY channel. A signature is a
-- contract (docs/schema.md): change one by adding a new name.
--
-- acquire_one() is the path of one lock; acquire() the general one (several
-- locks, re-entry, takeover, StaleAfter, a waiter's grant), which
-- check_one() runs for a waiter.

-- acquire_one: a request for one lock without StaleAfter, in every case
-- (the store sends it when the bare UPDATE of acquire_fast.sql granted
-- nothing, or first for a lock it last saw slow). Cheapest case first:
--   1. A lock of several slots whose row is fast (or new): a free slot of
--      the row's arrays, under the row; a free row in scalar mode is
--      turned to slot mode first.
--   2. A caller that will wait behind a slow lock whose waiters are all
--      their nodes' (unowned = 0), no node stale: queued under the row on
--      a few reads.
--   3. A lock with no row: its row is made fast, holding the caller; a
--      fast free row is granted as acquire_fast.sql grants it, and a
--      weighted request a fast row with no holder (scalar mode, or slot
--      mode with every slot free) as acquire_weighted.sql does.
--   4. A try of a lock full of unexpired holders, nobody queued: refused
--      on a plain read of holding (no write, no row lock).
--   5. Another slot number of a held lock, or queueing: under the row,
--      spilled to holder rows.
--   6. Everything else (re-entry, takeover, a grant to a waiter, dead
--      waiters): acquire(), after reaping.
-- A weight (p_weight k > 1, or -1: every slot) takes k slots as one hold:
-- in the lock's row in scalar mode when the row has no holder (step 3,
-- locks.weight and wacqs), else in a holder row (step 5 spills a fast row
-- first); step 1, which grants a slot of the row's arrays, is for holds
-- of one slot. k larger than
-- the lock's slots is refused at once ('too_heavy'), unless the ref holds the
-- lock (re-entry, at the weight it holds). Free slots are the slots less
-- the weights of the holders; the queue's count of waiters stands for the
-- slots they ask where it only decides to queue (each asks one at least).
-- The rows are acquire()'s, with the event's Seq and r_fast: whether the
-- lock's row is fast after a grant (the store's hint).
CREATE OR REPLACE FUNCTION {{schema}}.acquire_one(p_name text, p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_wait boolean, p_op bigint, p_wttl bigint, p_pats text[], p_lease bigint, p_back bigint,
    p_node bigint, p_weight integer)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean,
    r_ticket bigint, r_ttl bigint, r_hold bigint, r_weight integer, r_seq bigint, r_fast boolean)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_slots  integer := {{schema}}.slots_in(p_pats);
    v_need   integer := {{schema}}.need(p_weight, v_slots);
    v_now    timestamptz;
    v_exp    timestamptz;
    v_tok    bigint;
    v_k      integer;
    v_run    integer;
    v_turn   boolean;
    v_wait   integer;
    v_found  boolean := false;
    v_slow   boolean := false; -- the row is ours (step 2) and not fast
    v_new    boolean := false;
    v_free   boolean;
    v_empty  boolean;
    l        record;
    q        record;
    f        record;
    r        record;
BEGIN
    IF v_need > v_slots AND NOT EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = p_name AND h.ref = p_ref) THEN
        RETURN QUERY SELECT 'too_heavy'::text, 1, p_name, v_slots, 0, 0, p_ref, p_kind, 0::bigint, 0::bigint, 0::bigint,
            0::bigint, false, 0::bigint, 0::bigint, 0::bigint, p_weight, 0::bigint, false;
        RETURN;
    END IF;
    -- 1. A slot in the row's arrays.
    IF v_slots > 1 AND v_need = 1 AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        -- A read first: a try of a full lock takes no row lock.
        SELECT x.fast, x.ref, x.xref INTO l FROM {{schema}}.locks x WHERE x.name = p_name;
        IF NOT FOUND THEN
            INSERT INTO {{schema}}.locks (name) VALUES (p_name) ON CONFLICT DO NOTHING;
            IF FOUND AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name) THEN
                -- A new row: nothing holds or queues; it is ours.
                UPDATE {{schema}}.locks x SET fast = true, freed = clock_timestamp() WHERE x.name = p_name
                RETURNING x.fast, x.ref, x.xref INTO l;
            END IF;
        END IF;
        -- A free row in scalar mode turns to slot mode with the lock's
        -- slots as a change of definition in flight leaves them (see
        -- defs_key(); taken before the row, as resize() and define() take
        -- rows after it).
        v_turn := coalesce(l.fast AND l.xref IS NULL AND l.ref IS NULL, false);
        IF v_turn THEN
            PERFORM pg_advisory_xact_lock_shared({{schema}}.defs_key());
            v_slots := {{schema}}.slots_in(p_pats);
        END IF;
        IF l.fast AND ((l.xref IS NULL AND l.ref IS NULL)
                       OR (l.xref IS NOT NULL AND array_position(l.xref, NULL) IS NOT NULL
                           AND array_position(l.xref, p_ref) IS NULL)) THEN
            -- Take the row, then decide again on what it holds now.
            SELECT x.fast, x.ref, x.xref INTO l FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
            IF NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
                v_now := clock_timestamp();
                v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
                IF v_turn AND l.fast AND l.xref IS NULL AND l.ref IS NULL AND v_slots > 1 THEN
                    -- Free, in scalar mode: to slot mode.
                    UPDATE {{schema}}.locks x
                       SET ref = '', xref = array_fill(NULL::text, ARRAY[v_slots]),
                           xkind = array_fill(NULL::text, ARRAY[v_slots]),
                           xtoken = array_fill(NULL::bigint, ARRAY[v_slots]),
                           xacquired = array_fill(NULL::timestamptz, ARRAY[v_slots]),
                           xrenewed = array_fill(NULL::timestamptz, ARRAY[v_slots]),
                           xexpires = array_fill(NULL::timestamptz, ARRAY[v_slots]),
                           xttl = array_fill(NULL::bigint, ARRAY[v_slots]),
                           xhold = array_fill(NULL::bigint, ARRAY[v_slots]),
                           xop = array_fill(NULL::bigint, ARRAY[v_slots])
                     WHERE x.name = p_name;
                    l.xref := array_fill(NULL::text, ARRAY[v_slots]);
                END IF;
                v_k := array_position(l.xref, NULL);
                IF l.fast AND cardinality(l.xref) = v_slots AND v_k IS NOT NULL
                   AND array_position(l.xref, p_ref) IS NULL THEN
                    UPDATE {{schema}}.locks x
                       SET xref[v_k] = p_ref, xkind[v_k] = p_kind, xtoken[v_k] = {{schema}}.next_token(),
                           xacquired[v_k] = v_now, xrenewed[v_k] = v_now - p_back * interval '1 microsecond',
                           xexpires[v_k] = v_exp, xttl[v_k] = p_ttl, xhold[v_k] = p_hold, xop[v_k] = p_op,
                           acqs = x.acqs + 1
                     WHERE x.name = p_name
                    RETURNING x.xtoken[v_k], cardinality(array_remove(x.xref, NULL)) INTO v_tok, v_run;
                    RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, v_run, 0, p_ref, p_kind, v_tok,
                        {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                        1, nextval({{seqs}}), true;
                    RETURN;
                END IF;
            END IF;
        END IF;
    END IF;

    -- 2. Queueing behind a slow lock on a few reads. A caller that will
    -- wait takes the lock's row first: it queues under it, or the steps
    -- below decide under it (a slow row taken here needs no spill()).
    IF p_wait THEN
        SELECT x.fast, x.queued, x.unowned INTO q FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
        v_found := FOUND;
        v_slow := v_found AND NOT q.fast;
    END IF;
    -- Checked after the row is ours: the tombstone of an undo() that had
    -- the row before us (undo() takes it) is seen now.
    IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        RETURN QUERY SELECT 'cancelled'::text, 1, p_name, 0, 0, 0, p_ref, p_kind, 0::bigint,
            {{schema}}.micros(clock_timestamp()), 0::bigint, 0::bigint, false, 0::bigint, 0::bigint, 0::bigint,
            p_weight, 0::bigint, false;
        RETURN;
    END IF;
    IF v_found THEN
        IF NOT q.fast AND q.queued > 0 AND q.unowned = 0 AND v_slots IS NOT NULL
           AND NOT {{schema}}.nodes_stale(clock_timestamp()) THEN
            v_now := clock_timestamp();
            SELECT coalesce(sum(h.weight), 0)::int AS n,
                   coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_name;
            IF NOT f.mine AND q.queued + v_need > v_slots - f.live THEN
                RETURN QUERY SELECT * FROM {{schema}}.enqueue(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_op,
                    p_wttl, p_node, v_slots, f.n, q.queued, v_now, p_weight);
                RETURN;
            END IF;
        END IF;
    END IF;

    IF v_slots IS NOT NULL THEN
        -- 3. A new row, or a fast free one. A read first: an insert that
        -- meets the row would wait for a transaction changing it.
        SELECT x.fast AND x.ref IS NULL,
               x.fast AND ((x.xref IS NULL AND x.ref IS NULL)
                           OR (x.xref IS NOT NULL AND cardinality(array_remove(x.xref, NULL)) = 0))
          INTO v_free, v_empty FROM {{schema}}.locks x WHERE x.name = p_name;
        IF NOT FOUND THEN
            INSERT INTO {{schema}}.locks (name) VALUES (p_name) ON CONFLICT DO NOTHING;
            v_new := FOUND;
        ELSIF v_free AND v_need = 1 THEN
            -- Fast and free (the store's hint was stale, or a release
            -- freed it meanwhile): the grant of acquire_fast.sql.
            v_now := clock_timestamp();
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
            UPDATE {{schema}}.locks x
               SET ref = p_ref, kind = p_kind, token = {{schema}}.next_token(), acquired = v_now,
                   renewed = v_now - p_back * interval '1 microsecond', expires = v_exp, ttl = p_ttl,
                   hold = p_hold, op = p_op, acqs = x.acqs + 1
             WHERE x.name = p_name AND x.fast AND x.ref IS NULL
            RETURNING x.token INTO v_tok;
            IF FOUND THEN
                RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, 1, 0, p_ref, p_kind, v_tok,
                    {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                    1, nextval({{seqs}}), v_slots <= 1;
                RETURN;
            END IF;
        ELSIF v_empty AND v_need > 1 AND v_need <= v_slots THEN
            -- Weighted, the row fast with no holder: the grant of
            -- acquire_weighted.sql, in scalar mode.
            v_now := clock_timestamp();
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
            UPDATE {{schema}}.locks x
               SET ref = p_ref, kind = p_kind, token = {{schema}}.next_token(), acquired = v_now,
                   renewed = v_now - p_back * interval '1 microsecond', expires = v_exp, ttl = p_ttl,
                   hold = p_hold, op = p_op, acqs = x.acqs + 1, weight = v_need, wacqs = x.acqs + 1,
                   xref = NULL, xkind = NULL, xtoken = NULL, xacquired = NULL, xrenewed = NULL, xexpires = NULL,
                   xttl = NULL, xhold = NULL, xop = NULL
             WHERE x.name = p_name AND x.fast
               AND ((x.xref IS NULL AND x.ref IS NULL)
                    OR (x.xref IS NOT NULL AND cardinality(array_remove(x.xref, NULL)) = 0))
            RETURNING x.token INTO v_tok;
            IF FOUND THEN
                RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, v_need, 0, p_ref, p_kind, v_tok,
                    {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                    v_need, nextval({{seqs}}), true;
                RETURN;
            END IF;
        END IF;
        IF v_new AND v_need <= v_slots AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name) THEN
            -- A new row: nothing holds or queues. A weighted hold is the
            -- row's scalar holder (locks.weight and wacqs).
            v_now := clock_timestamp();
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
            UPDATE {{schema}}.locks x
               SET fast = true, ref = p_ref, kind = p_kind, token = {{schema}}.next_token(), acquired = v_now,
                   renewed = v_now - p_back * interval '1 microsecond', expires = v_exp, ttl = p_ttl,
                   hold = p_hold, op = p_op, acqs = x.acqs + 1, weight = v_need, wacqs = x.acqs + 1
             WHERE x.name = p_name
            RETURNING x.token INTO v_tok;
            RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, v_need, 0, p_ref, p_kind, v_tok,
                {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                v_need, nextval({{seqs}}), v_slots <= 1 OR v_need > 1;
            RETURN;
        ELSIF (NOT v_new OR v_need > 1) AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
            -- 4. A refusal on one read. One statement, so one snapshot:
            -- the counts and the oldest unexpired holder are of the same
            -- moment, wherever the holders are.
            v_now := clock_timestamp();
            SELECT c.n, c.live, c.mine, o.ref, o.kind, o.expires INTO r
              FROM (SELECT coalesce(sum(h.weight), 0)::int AS n,
                           coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                           coalesce(bool_or(h.ref = p_ref), false) AS mine
                      FROM {{schema}}.holding h WHERE h.lock = p_name) c
              LEFT JOIN LATERAL (
                    SELECT h.ref, h.kind, h.expires FROM {{schema}}.holding h
                     WHERE h.lock = p_name AND (h.expires IS NULL OR h.expires > v_now)
                     ORDER BY h.token LIMIT 1) o ON true;
            IF NOT p_wait AND NOT r.mine AND r.live + v_need > v_slots AND NOT {{schema}}.nodes_stale(v_now) THEN
                RETURN QUERY SELECT 'refused'::text, 1, p_name, v_slots, r.n, 0, r.ref, r.kind, 0::bigint,
                    {{schema}}.micros(v_now), {{schema}}.micros(r.expires), 0::bigint, false, 0::bigint, 0::bigint,
                    0::bigint, p_weight, 0::bigint, false;
                RETURN;
            END IF;
            IF NOT r.mine AND r.n + v_need <= v_slots THEN
                -- 5. A slot number is free (the lock's row free, or another
                -- slot of a multi-slot lock): take the row, then decide
                -- again on fresh reads of the holder rows.
                IF (v_slow OR {{schema}}.spill(p_name))
                   AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
                    SELECT coalesce(sum(h.weight), 0)::int AS n, coalesce(bool_or(h.ref = p_ref), false) AS mine,
                           (SELECT s FROM generate_series(1, v_slots) s
                             WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders x WHERE x.lock = p_name AND x.slot = s)
                             ORDER BY s LIMIT 1) AS slot
                      INTO f
                      FROM {{schema}}.holders h WHERE h.lock = p_name;
                    IF NOT f.mine AND f.n + v_need <= v_slots AND f.slot IS NOT NULL THEN
                        v_now := clock_timestamp();
                        v_exp := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
                        INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires,
                                                        ttl, hold, op, weight)
                        VALUES (p_name, p_ref, p_kind, {{schema}}.next_token(), f.slot, 1, v_now,
                                v_now - p_back * interval '1 microsecond', v_exp, p_ttl, p_hold, p_op, v_need)
                        ON CONFLICT DO NOTHING
                        RETURNING token INTO v_tok;
                        IF v_tok IS NOT NULL THEN
                            PERFORM {{schema}}.tally(p_name, 1, NULL, 0, 0, 0, NULL);
                            RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, f.n + v_need, 0, p_ref, p_kind,
                                v_tok, {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint,
                                p_ttl, p_hold, v_need, nextval({{seqs}}), f.n = 0 AND v_slots <= 1;
                            RETURN;
                        END IF;
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;
    IF p_wait AND v_slots IS NOT NULL THEN
        -- The lock is held or queued: queue the caller under the row, by
        -- acquire()'s rule.
        IF (v_slow OR {{schema}}.spill(p_name))
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
            v_now := clock_timestamp();
            SELECT coalesce(sum(h.weight), 0)::int AS n,
                   coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_name;
            v_wait := {{schema}}.waiting_of(p_name, v_now);
            IF NOT f.mine AND v_wait + v_need > v_slots - f.live THEN
                RETURN QUERY SELECT * FROM {{schema}}.enqueue(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_op,
                    p_wttl, p_node, v_slots, f.n, v_wait, v_now, p_weight);
                RETURN;
            END IF;
        END IF;
    END IF;

    -- 6. acquire(), which reads holding and spills the row it takes, after
    -- reaping the queue of stale nodes' waiters.
    PERFORM {{schema}}.reap_locked(ARRAY[p_name]);
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END,
               a.r_ev = 'granted' AND a.r_running = 1 AND coalesce(v_slots, 1) <= 1
          FROM {{schema}}.acquire(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, 0::bigint,
                                  p_wttl, 0::bigint, false, ARRAY[p_weight]) a;
    IF p_wait AND {{schema}}.attach_waiter_to_node(p_op, p_node, p_wttl) THEN
        -- Queued: its node's, soft state only.
        PERFORM {{schema}}.set_async_commit();
    END IF;
END
$sleeplock$;

-- enqueue: queues a caller of one lock (acquire_one() holds the lock's
-- row), its lease its node's; p_running and p_waiting are the lock's
-- counts before, p_weight the slots it asks. Soft state: commits without
-- waiting for the WAL.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(p_name text, p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_op bigint, p_wttl bigint, p_node bigint, p_slots integer, p_running integer,
    p_waiting integer, p_now timestamptz, p_weight integer)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean,
    r_ticket bigint, r_ttl bigint, r_hold bigint, r_weight integer, r_seq bigint, r_fast boolean)
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_ticket bigint := nextval({{tickets}});
BEGIN
    PERFORM {{schema}}.node_up(p_node, p_wttl, p_now);
    INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires, wttl, node)
    VALUES (v_ticket, p_op, p_ref, p_kind, ARRAY[p_name], p_ttl, p_hold, p_counted, p_now, {{schema}}.node_lease_sentinel(),
            p_wttl, p_node);
    INSERT INTO {{schema}}.queue (lock, ticket, own, weight) VALUES (p_name, v_ticket, true, p_weight);
    PERFORM {{schema}}.set_async_commit();
    RETURN QUERY SELECT 'queued'::text, 1, p_name, p_slots, p_running, p_waiting + 1, p_ref, p_kind, 0::bigint,
        {{schema}}.micros(p_now), 0::bigint, 0::bigint, false, v_ticket, 0::bigint, 0::bigint, p_weight,
        nextval({{seqs}}), false;
END
$sleeplock$;

-- acquire: the general acquisition of one slot of each lock of p_names
-- (caller's order), all or nothing. p_ticket 0: a new request, granted
-- when for every lock the ref holds it already or fewer live waiters are
-- queued than slots are free; else refused (p_wait false, decided on a
-- plain read of holding: no write, no row lock) or queued. p_ticket > 0:
-- the check of that queued waiter, granted when fewer live waiters are
-- ahead of it than slots are free. Its second pass takes the rows in
-- sorted order (lock_rows(), which spills them) and decides again. Expired
-- leases are taken over when a grant needs their slots; with p_stale > 0,
-- once not renewed for p_stale µs (StaleAfter). With p_whole, a new request
-- whose ref holds some of the locks but not all is refused at the first it
-- holds (re-entry only as a whole). A 'waiting' row carries in
-- r_expires the earliest expiry of the leases that block it. Rows (r_ev):
-- notfound, refused, queued (one per lock), waiting, gone (the waiter row
-- expired), cancelled, expired (a lease taken over), granted / reentered
-- (one per lock, in the caller's order), too_heavy (a lock has fewer slots
-- than asked: refused, or a waiter that a resize left too heavy, dequeued).
-- Weights: p_weights[i] is the slots asked of lock i (1 when NULL; -1:
-- every slot). Slots in use and free are counted with the holders' weights,
-- and the slots the waiters ahead ask with theirs; r_weight is the weight
-- of the hold of the row (granted, reentered, expired), else the one asked.
CREATE OR REPLACE FUNCTION {{schema}}.acquire(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint, p_counted boolean, p_wait boolean, p_op bigint, p_ticket bigint, p_wttl bigint, p_stale bigint, p_whole boolean, p_weights integer[])
 RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer, r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_weight integer)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $sleeplock$
#variable_conflict use_column
DECLARE
    n        integer := cardinality(p_names);
    v_now    timestamptz := clock_timestamp();
    v_pass   integer := 0;
    a_slots  integer[] := '{}';
    a_rows   integer[];
    a_live   integer[];
    a_mine   boolean[];
    a_ahead  integer[];
    a_total  integer[];
    a_taken  integer[];
    a_need   integer[] := '{}';
    a_wahead integer[];
    v_wahead integer;
    v_name   text;
    v_rows   integer;
    v_live   integer;
    v_mine   boolean;
    v_bad    integer;
    v_since  timestamptz;
    v_wexp   timestamptz;
    v_have   boolean;
    v_ticket bigint;
    v_exp    timestamptz;
    v_renew  timestamptz;
    v_lease  bigint;
    v_token  bigint;
    v_acq    timestamptz;
    v_pat    text;
    v_slot   integer;
    v_raced  boolean := false;
    v_races  integer := 0;
    a_tok    bigint[];
    v_slots  integer;
    v_ahead  integer;
    v_total  integer;
    v_before bigint := CASE WHEN p_ticket > 0 THEN p_ticket ELSE 9223372036854775807 END;
    i        integer;
    k        integer;
    r        record;
    t_idx    integer[] := '{}';
    t_ref    text[] := '{}';
    t_kind   text[] := '{}';
    t_token  bigint[] := '{}';
    t_acq    timestamptz[] := '{}';
    t_w      integer[] := '{}';
BEGIN
    r_idx := 0; r_lock := ''; r_slots := 0; r_running := 0; r_waiting := 0; r_ref := ''; r_kind := '';
    r_token := 0; r_at := 0; r_expires := 0; r_dur := 0; r_queued := false; r_ticket := 0; r_ttl := 0; r_hold := 0;
    r_weight := 1;
    -- the lease: expires hold (or ttl) from now, renewed dated back by ttl-hold
    v_lease := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;

    IF p_ticket > 0 THEN
        SELECT w.since, w.expires INTO v_since, v_wexp FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
        v_have := FOUND;
        IF NOT v_have OR v_wexp <= v_now THEN
            -- Granted by an earlier poll whose answer was lost?
            IF NOT v_have AND (SELECT count(*) FROM {{schema}}.holding h
                                WHERE h.lock = ANY (p_names) AND h.ref = p_ref) = n
               AND EXISTS (SELECT 1 FROM {{schema}}.holding h
                            WHERE h.lock = ANY (p_names) AND h.ref = p_ref AND h.op = p_op) THEN
                RETURN QUERY
                    SELECT CASE WHEN h.op = p_op THEN 'granted' ELSE 'reentered' END, u.i::int, u.n,
                           {{schema}}.slots_of(u.n), {{schema}}.running_of(u.n), {{schema}}.waiting_of(u.n, v_now),
                           h.ref, h.kind, h.token, {{schema}}.micros(h.acquired), {{schema}}.micros(h.expires),
                           0::bigint, false, p_ticket, h.ttl, h.hold, h.weight
                      FROM unnest(p_names) WITH ORDINALITY u(n, i)
                      JOIN {{schema}}.holding h ON h.lock = u.n AND h.ref = p_ref
                     ORDER BY u.i;
                RETURN;
            END IF;
            IF v_have THEN
                DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
                DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
            END IF;
            r_ev := 'gone'; r_ticket := p_ticket;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;

    LOOP
        v_pass := v_pass + 1;
        IF v_pass = 2 THEN
            IF n = 1 THEN
                INSERT INTO {{schema}}.locks AS l (name) VALUES (p_names[1])
                    ON CONFLICT (name) DO UPDATE SET name = excluded.name;
                PERFORM {{schema}}.spill(p_names[1]);
            ELSE
                PERFORM {{schema}}.lock_rows(p_names, true);
            END IF;
            IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
                r_ev := 'cancelled';
                RETURN NEXT;
                RETURN;
            END IF;
            v_now := clock_timestamp();
            -- Under the lock rows: waiters of dead or paused nodes go.
            FOR i IN 1 .. n LOOP
                PERFORM {{schema}}.drop_dead(p_names[i], v_now, 64);
            END LOOP;
        END IF;

        -- What each lock looks like now.
        a_rows := '{}'; a_live := '{}'; a_mine := '{}'; a_ahead := '{}'; a_total := '{}'; a_wahead := '{}';
        v_bad := 0;
        FOR i IN 1 .. n LOOP
            v_name := p_names[i];
            IF v_pass = 1 THEN
                v_slots := NULL;
                FOREACH v_pat IN ARRAY {{schema}}.patterns(v_name) LOOP
                    SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_pat;
                    EXIT WHEN FOUND;
                END LOOP;
                IF v_slots IS NULL THEN
                    r_ev := 'notfound'; r_idx := i; r_lock := v_name;
                    RETURN NEXT;
                    RETURN;
                END IF;
                a_slots[i] := v_slots;
                a_need[i] := {{schema}}.need(coalesce(p_weights[i], 1), v_slots);
            END IF;
            SELECT coalesce(sum(h.weight), 0)::int,
                   coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR NOT CASE WHEN p_stale > 0
                        THEN h.renewed <= v_now - p_stale * interval '1 microsecond' ELSE h.expires <= v_now END), 0)::int,
                   coalesce(bool_or(h.ref = p_ref), false),
                   (SELECT count(*)::int FROM {{schema}}.queue q
                     WHERE q.lock = v_name AND q.ticket < v_before
                       AND EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.ticket = q.ticket AND w.expires > v_now))
              INTO v_rows, v_live, v_mine, v_ahead
              FROM {{schema}}.holding h WHERE h.lock = v_name;
            IF p_ticket > 0 THEN
                SELECT count(*)::int INTO v_total FROM {{schema}}.queue q
                 WHERE q.lock = v_name
                   AND EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.ticket = q.ticket AND w.expires > v_now);
            ELSE
                v_total := v_ahead;
            END IF;
            -- The slots the live waiters ahead ask.
            v_wahead := v_ahead;
            IF v_ahead > 0 THEN
                SELECT coalesce(sum({{schema}}.need(q.weight, a_slots[i])), 0)::int INTO v_wahead
                  FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
                 WHERE q.lock = v_name AND q.ticket < v_before AND w.expires > v_now;
            END IF;
            a_rows[i] := v_rows;
            a_live[i] := v_live;
            a_mine[i] := v_mine;
            a_ahead[i] := v_ahead;
            a_total[i] := v_total;
            a_wahead[i] := v_wahead;
            IF NOT v_mine AND a_need[i] > a_slots[i] THEN
                -- More slots than the lock has: refused at once, or a
                -- waiter a resize left too heavy leaves the queue (those
                -- behind it may go now).
                IF p_ticket > 0 THEN
                    DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
                    DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
                    PERFORM {{schema}}.wake(u, 1) FROM unnest(p_names) u;
                END IF;
                r_ev := 'too_heavy'; r_idx := i; r_lock := v_name; r_slots := a_slots[i]; r_ticket := p_ticket;
                r_weight := coalesce(p_weights[i], 1);
                RETURN NEXT;
                RETURN;
            END IF;
            IF v_bad = 0 AND NOT v_mine AND v_wahead + a_need[i] > a_slots[i] - v_live THEN
                v_bad := i;
            END IF;
        END LOOP;

        IF p_whole AND p_ticket = 0 AND true = ANY (a_mine) AND false = ANY (a_mine) THEN
            -- Re-entry only as a whole: refused at the first lock the ref
            -- holds, naming its own hold.
            i := array_position(a_mine, true);
            SELECT x.kind, x.token, x.expires INTO r FROM {{schema}}.holding x
             WHERE x.lock = p_names[i] AND x.ref = p_ref LIMIT 1;
            r_ev := 'refused'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i];
            r_running := a_rows[i]; r_waiting := a_ahead[i]; r_at := {{schema}}.micros(v_now);
            r_ref := p_ref; r_kind := coalesce(r.kind, ''); r_token := coalesce(r.token, 0);
            r_expires := {{schema}}.micros(r.expires); r_queued := false;
            RETURN NEXT;
            RETURN;
        END IF;

        IF v_bad = 0 AND v_pass = 2 THEN
            -- Lock the expired leases to take over, of every lock first, so
            -- that a lease being renewed or guarded right now makes us give
            -- up (nothing deleted) instead of waiting for it.
            a_taken := array_fill(0, ARRAY[n]);
            FOR i IN 1 .. n LOOP
                IF NOT a_mine[i] AND a_slots[i] - a_rows[i] < a_wahead[i] + a_need[i] THEN
                    k := 0;
                    FOR r IN SELECT h.ref, h.kind, h.token, h.acquired, h.weight FROM {{schema}}.holders h
                              WHERE h.lock = p_names[i] AND h.expires IS NOT NULL
                                AND CASE WHEN p_stale > 0 THEN h.renewed <= v_now - p_stale * interval '1 microsecond'
                                         ELSE h.expires <= v_now END
                              ORDER BY h.token FOR UPDATE SKIP LOCKED LOOP
                        t_idx := t_idx || i;
                        t_ref := t_ref || r.ref;
                        t_kind := t_kind || r.kind;
                        t_token := t_token || r.token;
                        t_acq := t_acq || r.acquired;
                        t_w := t_w || r.weight;
                        k := k + r.weight;
                    END LOOP;
                    a_taken[i] := k;
                    IF a_slots[i] - (a_rows[i] - k) < a_wahead[i] + a_need[i] THEN
                        v_bad := i;
                        EXIT;
                    END IF;
                END IF;
            END LOOP;
        END IF;

        IF v_bad = 0 AND v_pass = 2 THEN
            -- Grant: take over the expired leases, give every other lock a free
            -- slot number (unique per lock: the database itself refuses a
            -- second holder of a slot, also to a concurrent fast-path grant
            -- that takes no lock row), then renew the re-entered.
            FOR k IN 1 .. coalesce(cardinality(t_idx), 0) LOOP
                i := t_idx[k];
                DELETE FROM {{schema}}.holders h WHERE h.lock = p_names[i] AND h.ref = t_ref[k];
                PERFORM {{schema}}.tally(p_names[i], 0, NULL, 0, 1, 1, {{schema}}.micros(v_now) - {{schema}}.micros(t_acq[k]));
                a_rows[i] := a_rows[i] - t_w[k];
                r_ev := 'expired'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i]; r_running := a_rows[i];
                r_waiting := a_total[i]; r_ref := t_ref[k]; r_kind := t_kind[k]; r_token := t_token[k]; r_weight := t_w[k];
                r_at := {{schema}}.micros(v_now); r_dur := {{schema}}.micros(v_now) - {{schema}}.micros(t_acq[k]);
                RETURN NEXT;
            END LOOP;
            t_idx := '{}'; t_ref := '{}'; t_kind := '{}'; t_token := '{}'; t_acq := '{}'; t_w := '{}';
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + v_lease * interval '1 microsecond' END;
            v_renew := CASE WHEN p_ttl > 0 THEN v_now - (p_ttl - v_lease) * interval '1 microsecond' ELSE v_now END;
            a_tok := array_fill(0::bigint, ARRAY[n]);
            FOR i IN 1 .. n LOOP
                CONTINUE WHEN a_mine[i];
                SELECT s INTO v_slot FROM generate_series(1, a_slots[i]) s
                 WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = p_names[i] AND h.slot = s)
                 ORDER BY s LIMIT 1;
                v_token := NULL;
                IF v_slot IS NOT NULL THEN
                    INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold, op, weight)
                    VALUES (p_names[i], p_ref, p_kind, {{schema}}.next_token(), v_slot, 1, v_now, v_renew, v_exp, p_ttl, p_hold, p_op, a_need[i])
                    ON CONFLICT DO NOTHING
                    RETURNING token INTO v_token;
                END IF;
                IF v_token IS NULL THEN
                    -- A fast-path grant took the slot meanwhile: give back what
                    -- this call inserted and decide again.
                    DELETE FROM {{schema}}.holders h
                     WHERE h.ref = p_ref AND h.token = ANY (a_tok) AND h.lock = ANY (p_names);
                    v_raced := true;
                    EXIT;
                END IF;
                a_tok[i] := v_token;
            END LOOP;
            IF v_raced THEN
                v_raced := false;
                v_pass := 1;
                v_races := v_races + 1;
                IF v_races > 100 THEN
                    RAISE EXCEPTION 'sleeplock: acquire of % kept racing', p_names;
                END IF;
                CONTINUE;
            END IF;
            IF p_ticket > 0 THEN
                DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
                DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
                -- Slots left over for the waiters behind: wake them.
                FOR i IN 1 .. n LOOP
                    k := a_slots[i] - a_rows[i] - CASE WHEN a_mine[i] THEN 0 ELSE a_need[i] END;
                    IF k > 0 AND a_total[i] > 1 THEN
                        PERFORM {{schema}}.wake(p_names[i], k);
                    END IF;
                END LOOP;
            END IF;
            FOR i IN 1 .. n LOOP
                IF a_mine[i] THEN
                    UPDATE {{schema}}.holders h
                       SET count   = h.count + CASE WHEN p_counted THEN 1 ELSE 0 END,
                           op      = CASE WHEN p_counted THEN p_op ELSE h.op END,
                           ttl     = CASE WHEN p_ttl > 0 THEN p_ttl ELSE h.ttl END,
                           hold    = CASE WHEN p_ttl > 0 THEN p_hold ELSE h.hold END,
                           renewed = CASE WHEN p_ttl > 0 THEN v_renew ELSE h.renewed END,
                           expires = CASE WHEN p_ttl > 0 THEN v_exp ELSE h.expires END
                     WHERE h.lock = p_names[i] AND h.ref = p_ref
                    RETURNING h.kind, h.token, h.acquired, h.expires, h.ttl, h.hold, h.weight INTO r;
                    IF NOT FOUND THEN
                        -- Released by its own ref meanwhile (a fast-path release
                        -- takes no lock row): let the caller try again.
                        RAISE EXCEPTION 'sleeplock: the hold of % on % was released while re-entered', p_ref, p_names[i]
                            USING ERRCODE = '40001';
                    END IF;
                    r_ev := 'reentered'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i];
                    r_running := a_rows[i]; r_waiting := a_total[i] - CASE WHEN p_ticket > 0 THEN 1 ELSE 0 END;
                    r_ref := p_ref; r_kind := r.kind; r_token := r.token; r_at := {{schema}}.micros(r.acquired);
                    r_expires := {{schema}}.micros(r.expires); r_dur := 0; r_ticket := p_ticket;
                    r_ttl := r.ttl; r_hold := r.hold; r_weight := r.weight;
                    RETURN NEXT;
                ELSE
                    r_ev := 'granted'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i];
                    r_running := a_rows[i] + a_need[i]; r_waiting := a_total[i] - CASE WHEN p_ticket > 0 THEN 1 ELSE 0 END;
                    r_ref := p_ref; r_kind := p_kind; r_token := a_tok[i]; r_at := {{schema}}.micros(v_now);
                    r_expires := {{schema}}.micros(v_exp);
                    r_dur := CASE WHEN p_ticket > 0 THEN {{schema}}.micros(v_now) - {{schema}}.micros(v_since) ELSE 0 END;
                    r_ticket := p_ticket; r_ttl := p_ttl; r_hold := p_hold; r_weight := a_need[i];
                    PERFORM {{schema}}.tally(p_names[i], 1, CASE WHEN p_ticket > 0 THEN r_dur END, 0, 0, 0, NULL);
                    RETURN NEXT;
                END IF;
            END LOOP;
            RETURN;
        END IF;

        IF v_bad = 0 THEN
            CONTINUE; -- pass 1 found it grantable: lock and decide again
        END IF;

        IF p_ticket > 0 THEN
            -- Still waiting: renew the waiter's lease when a third of it is gone.
            IF v_wexp - v_now < (p_wttl * 2 / 3) * interval '1 microsecond' THEN
                UPDATE {{schema}}.waiters w SET expires = v_now + p_wttl * interval '1 microsecond'
                 WHERE w.ticket = p_ticket;
            END IF;
            SELECT {{schema}}.micros(min(h.expires)) INTO r_expires FROM {{schema}}.holding h
             WHERE h.lock = p_names[v_bad] AND h.expires > v_now;
            r_ev := 'waiting'; r_idx := v_bad; r_lock := p_names[v_bad]; r_ticket := p_ticket;
            r_weight := coalesce(p_weights[v_bad], 1);
            r_at := {{schema}}.micros(v_now); r_slots := a_slots[v_bad];
            RETURN NEXT;
            RETURN;
        END IF;

        IF NOT p_wait THEN
            -- Refused: the first refused lock in the caller's order and its
            -- oldest unexpired holder (none when only the queue refused: a
            -- slot is free, but others wait).
            IF a_live[v_bad] >= a_slots[v_bad] OR a_ahead[v_bad] = 0 THEN
                SELECT x.ref, x.kind, x.token, x.expires INTO r FROM {{schema}}.holding x
                 WHERE x.lock = p_names[v_bad] AND (x.expires IS NULL OR NOT CASE WHEN p_stale > 0
                        THEN x.renewed <= v_now - p_stale * interval '1 microsecond' ELSE x.expires <= v_now END)
                 ORDER BY x.token LIMIT 1;
                r_ref := coalesce(r.ref, ''); r_kind := coalesce(r.kind, ''); r_token := coalesce(r.token, 0);
                r_expires := {{schema}}.micros(r.expires); r_queued := r.ref IS NULL;
            ELSE
                r_ref := ''; r_kind := ''; r_token := 0; r_expires := 0; r_queued := true;
            END IF;
            r_ev := 'refused'; r_idx := v_bad; r_lock := p_names[v_bad]; r_slots := a_slots[v_bad];
            r_weight := coalesce(p_weights[v_bad], 1);
            r_running := a_rows[v_bad]; r_waiting := a_ahead[v_bad]; r_at := {{schema}}.micros(v_now);
            RETURN NEXT;
            RETURN;
        END IF;

        IF v_pass = 1 THEN
            CONTINUE; -- queue under the lock rows
        END IF;

        -- Queue: a ticket from the global sequence, one queue row per lock.
        v_ticket := nextval({{tickets}});
        INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires)
        VALUES (v_ticket, p_op, p_ref, p_kind, p_names, p_ttl, p_hold, p_counted, v_now,
                v_now + p_wttl * interval '1 microsecond');
        FOR i IN 1 .. n LOOP
            INSERT INTO {{schema}}.queue (lock, ticket, weight) VALUES (p_names[i], v_ticket, coalesce(p_weights[i], 1));
            r_weight := coalesce(p_weights[i], 1);
            r_ev := 'queued'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i]; r_running := a_rows[i];
            r_waiting := a_total[i] + 1; r_ref := p_ref; r_kind := p_kind; r_at := {{schema}}.micros(v_now);
            r_ticket := v_ticket;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END LOOP;
END
$sleeplock$;

-- check_one: a waiter's check (p_ticket > 0), and the first call of an
-- acquisition of several locks or with StaleAfter (p_ticket 0). A waiter
-- of one lock takes the lock's row first, then finds the grant a release
-- made for it (holders.handed), or answers 'waiting' on the holder rows
-- alone when the lock is full of unexpired holders; everything else is
-- acquire()'s, after reaping (p_whole: re-entry only as a whole, see
-- acquire()). p_weights: the weight asked of each lock. Rows: acquire()'s,
-- with the event's Seq.
CREATE OR REPLACE FUNCTION {{schema}}.check_one(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint, p_counted boolean, p_wait boolean, p_op bigint, p_ticket bigint, p_wttl bigint, p_stale bigint, p_node bigint, p_whole boolean, p_weights integer[])
 RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer, r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_weight integer, r_seq bigint)
 LANGUAGE plpgsql
AS $sleeplock$
#variable_conflict use_column
DECLARE
    g       bigint[];
    v_now   timestamptz;
    v_slots integer;
    f       record;
BEGIN
    IF p_ticket > 0 AND cardinality(p_names) = 1 THEN
        -- The lock's row first: a release handing this waiter its slot
        -- either committed before (and is seen below) or waits until this
        -- statement ends (and finds the waiter granted, or still queued).
        -- Without it, acquire() could meet the handed hold half way and
        -- take it for a re-entry, or for a grant whose answer was lost.
        PERFORM {{schema}}.spill(p_names[1]);
        SELECT h.handed INTO g FROM {{schema}}.holders h
         WHERE h.lock = p_names[1] AND h.ref = p_ref AND h.op = p_op;
        IF g IS NOT NULL AND g[1] = p_op AND g[2] = p_ticket THEN
            RETURN QUERY SELECT 'granted'::text, 1, p_names[1], g[7]::int, g[8]::int, g[9]::int, p_ref, p_kind, g[3],
                g[4], g[5], g[10], false, p_ticket, p_ttl, p_hold,
                {{schema}}.need(coalesce(p_weights[1], 1), g[7]::int), g[6];
            RETURN;
        END IF;
        v_now := clock_timestamp();
        IF p_stale = 0 AND NOT {{schema}}.nodes_stale(v_now) THEN
            -- Still waiting, on the holder rows alone: a waiter its node
            -- keeps, of a lock whose slots are all held by unexpired
            -- holders other than its ref, waits whatever the queue holds
            -- (unless a resize left it too heavy: acquire() ends it).
            -- acquire() would answer the same after counting the queue;
            -- this is what a head's periodic check costs. (While a node is
            -- stale a holder may be a grant that ended with its node:
            -- acquire() decides, after reaping.)
            SELECT coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine,
                   min(h.expires) FILTER (WHERE h.expires > v_now) AS next
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_names[1];
            v_slots := {{schema}}.slots_of(p_names[1]);
            IF NOT f.mine AND f.live >= v_slots
               AND EXISTS (SELECT 1 FROM {{schema}}.waiters w
                            WHERE w.ticket = p_ticket AND w.op = p_op AND w.node = p_node
                              AND w.expires = {{schema}}.node_lease_sentinel())
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q
                                WHERE q.ticket = p_ticket AND q.lock = p_names[1] AND q.weight > v_slots) THEN
                RETURN QUERY SELECT 'waiting'::text, 1, p_names[1], v_slots, 0, 0, ''::text, ''::text, 0::bigint,
                    {{schema}}.micros(v_now), {{schema}}.micros(f.next), 0::bigint, false, p_ticket, 0::bigint,
                    0::bigint, coalesce(p_weights[1], 1), 0::bigint;
                RETURN;
            END IF;
        END IF;
    END IF;
    IF p_ticket > 0 AND cardinality(p_names) > 1 THEN
        -- The rows first, in acquire()'s order: a check that finds its
        -- waiter gone deletes its queue rows, whose trigger updates the
        -- locks' rows (see locks.queued).
        PERFORM {{schema}}.lock_rows(p_names, false);
    END IF;
    PERFORM {{schema}}.reap_locked(p_names);
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_ticket, p_wttl,
                                  p_stale, p_whole, p_weights) a;
    IF {{schema}}.attach_waiter_to_node(p_op, p_node, p_wttl)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = ANY (p_names) AND h.op = p_op) THEN
        -- Still waiting (or queued again): nothing but soft state changed.
        PERFORM {{schema}}.set_async_commit();
    END IF;
END
$sleeplock$;

-- lock_rows: takes and spills the rows of p_names in sorted order (no
-- deadlock between callers naming them in other orders), creating the
-- missing ones when p_create, skipping them otherwise.
CREATE OR REPLACE FUNCTION {{schema}}.lock_rows(p_names text[], p_create boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    IF cardinality(p_names) > 1 THEN
        p_names := ARRAY(SELECT DISTINCT u FROM unnest(p_names) u ORDER BY u);
    END IF;
    FOREACH v_name IN ARRAY p_names LOOP
        LOOP
            EXIT WHEN {{schema}}.spill(v_name) OR NOT p_create;
            INSERT INTO {{schema}}.locks (name) VALUES (v_name) ON CONFLICT DO NOTHING;
        END LOOP;
    END LOOP;
END
$sleeplock$;
