-- Release and handover: release_one() is the path of one lock, release()
-- the general one (several locks, ReleaseStale, counted holds); both hand
-- freed slots to the head waiters (hand_over()). undo() abandons an
-- acquisition.

-- release_one: the release of one lock in every case, which hands the
-- freed slots to the head waiters (the store sends it when the bare UPDATE
-- of release_fast.sql released nothing, or first for a lock it last saw
-- slow). The lock's row is taken first; then, cheapest case first:
--   1. A slot in the row's arrays (slot mode): freed in place and timed
--      when sampled; a row 'fast' tells the store the row stayed fast.
--   2. The lock's only hold, nobody queued: deleted, the row fast again.
--   3. Other holders or waiters: release_among_others().
--   4. Everything else (a counted hold, not held, no definition): release().
-- p_events: the event's slots are wanted; p_pats: the name's patterns;
-- p_sample: time the hold whatever its token (the store samples by time).
-- r_running counts slots (the holders' weights); r_weight is the released
-- hold's.
CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
    p_pats text[], p_node bigint, p_sample boolean)
RETURNS SETOF {{schema}}.release_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now   timestamptz;
    v_k     integer;
    l       record;
    r       record;
BEGIN
    SELECT x.fast, x.xref, x.xtoken, x.queued, x.unowned INTO l
      FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
    -- 1.
    v_k := CASE WHEN l.fast THEN array_position(l.xref, p_ref) END;
    IF v_k IS NOT NULL AND (p_token = 0 OR l.xtoken[v_k] = p_token) THEN
        v_now := clock_timestamp();
        UPDATE {{schema}}.locks x
           SET xref[v_k] = NULL, freed = v_now, rels = x.rels + 1,
               holds = x.holds + CASE WHEN p_sample OR {{schema}}.timed(x.xtoken[v_k]) THEN 1 ELSE 0 END,
               hold_us = x.hold_us + CASE WHEN p_sample OR {{schema}}.timed(x.xtoken[v_k])
                   THEN greatest({{schema}}.micros(v_now) - {{schema}}.micros(x.xacquired[v_k]), 0) ELSE 0 END,
               hb = CASE WHEN p_sample OR {{schema}}.timed(x.xtoken[v_k])
                   THEN {{schema}}.bump(x.hb, {{schema}}.micros(v_now) - {{schema}}.micros(x.xacquired[v_k]))
                   ELSE x.hb END
         WHERE x.name = p_name
        RETURNING x.xkind[v_k] AS kind, x.xtoken[v_k] AS token, x.xacquired[v_k] AS acquired,
                  cardinality(array_remove(x.xref, NULL)) AS run
             INTO r;
        RETURN QUERY VALUES ('released'::text, 1, p_name, CASE WHEN p_events THEN {{schema}}.slots_in(p_pats) ELSE 0 END,
            r.run, 0, p_ref, r.kind, r.token, {{schema}}.micros(v_now),
            {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), 1, nextval({{seqs}})),
            ('fast', 1, p_name, 0, 0, 0, '', '', 0, 0, 0, 1, 0);
        RETURN;
    END IF;
    -- The row is ours; a fast one (its holder in the row) is spilled first.
    IF NOT l.fast OR {{schema}}.spill(p_name) THEN
        -- 2. No other holder or waiter can appear while the row is ours.
        -- The row is fast again, for a grant of any weight.
        IF coalesce(l.queued, 0) = 0 THEN
            DELETE FROM {{schema}}.holders h
             WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token) AND h.count <= 1
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders x WHERE x.lock = p_name AND x.ref <> p_ref)
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name)
            RETURNING h.kind, h.token, h.acquired, h.weight INTO r;
            IF FOUND THEN
                v_now := clock_timestamp();
                PERFORM {{schema}}.tally(p_name, 0, NULL, 1, 0, 0,
                    {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), p_sample OR {{schema}}.timed(r.token));
                UPDATE {{schema}}.locks x SET fast = true, ref = NULL, freed = v_now WHERE x.name = p_name;
                RETURN QUERY SELECT 'released'::text, 1, p_name,
                    CASE WHEN p_events THEN {{schema}}.slots_in(p_pats) ELSE 0 END, 0, 0, p_ref, r.kind, r.token,
                    {{schema}}.micros(v_now), {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), r.weight,
                    nextval({{seqs}});
                RETURN;
            END IF;
        END IF;
        -- 3.
        RETURN QUERY SELECT * FROM {{schema}}.release_among_others(p_name, p_token, p_ref, p_events, p_node, p_sample,
                                                                   l.queued, l.unowned, false);
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    -- 4.
    RETURN QUERY SELECT * FROM {{schema}}.release(ARRAY[p_name], ARRAY[p_token], p_ref, NULL::bigint, p_events,
                                                  p_sample);
END
$sleeplock$;

-- release_among_others: step 3 of release_one(), the lock's row taken and
-- spilled: the hold of p_ref (token p_token, 0: any) deleted where other
-- holders or waiters may remain; the stale nodes' waiters reaped, the dead
-- dropped (a bounded number), the heads granted
-- (hand_over(), which counts the release in the UPDATE of the lock's row
-- that counts the first grant), the row fast again when nothing is left.
-- A grant for a waiter of p_node comes back as a row 'handed' (its payload
-- in r_ref) for the store to hand over after the commit, instead of a
-- notification. p_queued and p_unowned: the row's counts (locks.queued,
-- read under the row; NULL: not read). p_lost: the hold is ended by
-- another's hand (ReleaseStale: counted in losses). No row: no such hold
-- (release() decides). release() releases each of its locks here too.
CREATE OR REPLACE FUNCTION {{schema}}.release_among_others(p_name text, p_token bigint, p_ref text,
    p_events boolean, p_node bigint, p_sample boolean, p_queued integer, p_unowned integer, p_lost boolean)
RETURNS SETOF {{schema}}.release_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now   timestamptz;
    v_slots integer;
    v_run   integer;
    v_wait  integer;
    v_dead  integer;
    v_stale boolean;
    r       record;
BEGIN
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token) AND h.count <= 1
    RETURNING h.kind, h.token, h.acquired, h.weight INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    v_stale := {{schema}}.nodes_stale(v_now);
    IF v_stale THEN
        -- Waiters of nodes that stopped renewing: their node's expiry.
        PERFORM {{schema}}.reap(p_name, v_now, true);
    END IF;
    SELECT coalesce(sum(h.weight), 0)::int INTO v_run FROM {{schema}}.holders h WHERE h.lock = p_name;
    -- The live and the dead waiters: the row's count, as waiter_counts()
    -- reads it, when every waiter is its node's and no node is stale.
    IF v_stale OR p_unowned IS DISTINCT FROM 0 THEN
        SELECT c.r_live, c.r_dead INTO v_wait, v_dead FROM {{schema}}.waiter_counts(p_name, v_now) c;
    ELSE
        v_wait := p_queued; v_dead := 0;
    END IF;
    IF v_dead > 0 THEN
        PERFORM {{schema}}.drop_dead(p_name, v_now, 64);
    END IF;
    v_slots := CASE WHEN p_events OR v_wait > 0 THEN {{schema}}.slots_in({{schema}}.patterns(p_name)) END;
    RETURN QUERY SELECT 'released'::text, 1, p_name, CASE WHEN p_events THEN v_slots ELSE 0 END, v_run, v_wait, p_ref,
        r.kind, r.token, {{schema}}.micros(v_now), {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), r.weight,
        nextval({{seqs}});
    IF v_wait > 0 AND v_slots IS NOT NULL THEN
        IF p_lost THEN -- (hand_over() counts the release)
            PERFORM {{schema}}.tally(p_name, 0, NULL, 0, 0, 1, NULL, false);
        END IF;
        RETURN QUERY SELECT 'handed'::text, 1, p_name, 0, 0, 0, m, ''::text, 0::bigint, 0::bigint, 0::bigint, 1,
                            0::bigint
                       FROM {{schema}}.hand_over(p_name, v_slots, v_run, v_wait, v_now, p_node,
                           CASE WHEN p_sample OR {{schema}}.timed(r.token)
                                THEN {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired) END, 1) m;
        RETURN;
    END IF;
    PERFORM {{schema}}.tally(p_name, 0, NULL, 1, 0, p_lost::integer,
        {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), p_sample OR {{schema}}.timed(r.token));
    IF v_run = 0 AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
        UPDATE {{schema}}.locks x SET fast = true, ref = NULL, freed = v_now WHERE x.name = p_name;
    END IF;
END
$sleeplock$;

-- drop_dead: deletes up to p_limit dead waiters of lock p_name (whose row
-- the caller holds), after reaping its queue; only its own queue rows.
CREATE OR REPLACE FUNCTION {{schema}}.drop_dead(p_name text, p_now timestamp with time zone, p_limit integer)
 RETURNS integer
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_n integer;
BEGIN
    PERFORM {{schema}}.reap(p_name, p_now, false);
    -- Only this lock's queue rows: those of a dead waiter of several locks
    -- on other locks are theirs to delete, under their rows (the trigger on
    -- queue updates the lock's row); its waiter row goes with its last.
    WITH dead AS (
        SELECT q.ticket FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
         WHERE q.lock = p_name AND w.expires <= p_now
         LIMIT p_limit
    ), dq AS (
        DELETE FROM {{schema}}.queue q USING dead d WHERE q.lock = p_name AND q.ticket = d.ticket
        RETURNING q.ticket
    ), dw AS (
        DELETE FROM {{schema}}.waiters w USING dq
         WHERE w.ticket = dq.ticket
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue x WHERE x.ticket = w.ticket AND x.lock <> p_name)
    )
    SELECT count(*) INTO v_n FROM dq;
    IF v_n > 0 THEN
        PERFORM {{schema}}.wake(p_name, 1);
    END IF;
    RETURN v_n;
END
$sleeplock$;

-- hand_over: under lock p_name's row, grants its free slots (p_run: the
-- slots in use) to the live heads of its queue in ticket order, each the
-- slots it asks, until a head asks more than are free; drawing their tokens and Seq, and
-- records each grant's event in holders.handed, until a waiter it may not
-- grant alone (one of several locks, one whose ref holds the lock, one of
-- a stale node), which is woken to check for itself. The grants for
-- waiters of node p_node are returned (their payloads), the others sent
-- with NOTIFY. p_rels releases (0 or 1) of a hold of p_hold µs (NULL: not
-- timed) are counted with the first grant, in one UPDATE of the lock's
-- row, or alone when nothing is granted (p_slots 0: no definition).
CREATE OR REPLACE FUNCTION {{schema}}.hand_over(p_name text, p_slots integer, p_run integer, p_wait integer,
    p_now timestamp with time zone, p_node bigint, p_hold bigint, p_rels integer)
 RETURNS SETOF text
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_free  integer := p_slots - p_run;
    v_slot  integer;
    v_lease bigint;
    v_exp   timestamptz;
    v_renew timestamptz;
    v_tok   bigint;
    v_msg   text;
    w       record;
BEGIN
    LOOP
        EXIT WHEN v_free <= 0;
        -- The head: the one before it was granted and left the queue.
        SELECT x.ticket, x.op, x.ref, x.kind, x.locks, x.ttl, x.hold, x.since, x.node,
               {{schema}}.need(q.weight, p_slots) AS need,
               CASE WHEN x.expires = {{schema}}.node_lease_sentinel()
                    THEN coalesce(n.expires > p_now + (n.wttl * 3 / 10) * interval '1 microsecond', false)
                    ELSE {{schema}}.micros(x.expires) - {{schema}}.micros(p_now)
                           > coalesce(x.wttl, {{schema}}.micros(x.expires) - {{schema}}.micros(x.since)) * 3 / 10
               END AS fresh
          INTO w
          FROM {{schema}}.queue q JOIN {{schema}}.waiters x ON x.ticket = q.ticket
          LEFT JOIN {{schema}}.nodes n ON n.id = x.node
         WHERE q.lock = p_name AND x.expires > p_now
         ORDER BY q.ticket
         LIMIT 1;
        EXIT WHEN NOT FOUND;
        -- The head asks more than is free: it waits, and so do those
        -- behind it.
        EXIT WHEN w.need > v_free AND w.need <= p_slots;
        -- Not ours to grant (several locks, a waiter whose node stopped
        -- renewing it, a ref that already holds a slot, a waiter a resize
        -- left too heavy): the waiter checks for itself.
        IF cardinality(w.locks) <> 1 OR NOT w.fresh OR w.need > p_slots
           OR (p_run > 0 AND EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.ref = w.ref)) THEN
            PERFORM {{schema}}.wake(p_name, v_free);
            EXIT;
        END IF;
        -- Nothing holds: slot 1 is free.
        IF p_run = 0 THEN
            v_slot := 1;
        ELSE
            v_slot := {{schema}}.free_slot(p_name, p_slots);
            EXIT WHEN v_slot IS NULL;
        END IF;
        v_lease := CASE WHEN w.hold > 0 AND w.hold < w.ttl THEN w.hold ELSE w.ttl END;
        v_exp := CASE WHEN w.ttl > 0 THEN p_now + v_lease * interval '1 microsecond' END;
        v_renew := CASE WHEN w.ttl > 0 THEN p_now - (w.ttl - v_lease) * interval '1 microsecond' ELSE p_now END;
        v_tok := {{schema}}.next_token();
        PERFORM {{schema}}.tally(p_name, 1, {{schema}}.micros(p_now) - {{schema}}.micros(w.since), p_rels, 0, 0, p_hold,
            p_hold IS NOT NULL);
        p_rels := 0;
        p_hold := NULL;
        p_run := p_run + w.need;
        p_wait := p_wait - 1;
        WITH g AS (
            SELECT ARRAY[w.op, w.ticket, v_tok, {{schema}}.micros(p_now), {{schema}}.micros(v_exp), nextval({{seqs}}),
                         p_slots::bigint, p_run::bigint, p_wait::bigint,
                         {{schema}}.micros(p_now) - {{schema}}.micros(w.since)] AS a
        ), dq AS (
            DELETE FROM {{schema}}.queue q WHERE q.ticket = w.ticket
        ), dw AS (
            DELETE FROM {{schema}}.waiters x WHERE x.ticket = w.ticket
        ), ins AS (
            INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold,
                                           op, handed, node, weight)
            SELECT p_name, w.ref, w.kind, v_tok, v_slot, 1, p_now, v_renew, v_exp, w.ttl, w.hold, w.op, g.a, w.node,
                   w.need
              FROM g
        )
        SELECT 'g ' || array_to_string(g.a, ' ') INTO v_msg FROM g;
        IF w.node IS NOT DISTINCT FROM p_node AND p_node IS NOT NULL THEN
            RETURN NEXT v_msg;
        ELSE
            PERFORM pg_notify({{channel}}, v_msg);
        END IF;
        v_free := v_free - w.need;
    END LOOP;
    IF p_rels > 0 THEN
        PERFORM {{schema}}.tally(p_name, 0, NULL, p_rels, 0, 0, p_hold, p_hold IS NOT NULL);
    END IF;
END
$sleeplock$;

-- release: the general release (p_stale NULL) or release-if-stale (p_stale
-- >= 0: microseconds, 0 meaning "past its expiry") of the locks of p_names
-- that p_ref holds (with the token, where not 0), under their rows; a
-- counted hold is decremented, any other released by
-- release_among_others(), which hands the freed slots to the head waiters
-- and makes an idle row fast again (no 'handed' row: p_node NULL). A hold
-- released without its token (by another caller naming its ref, or as
-- stale) is told to its holder's node (lost()). p_sample: time the holds
-- ended whatever their tokens (the store samples by time). Rows:
-- notfound, or released / decremented / notheld, one per lock in the
-- caller's order, with the Seq of a release; none when a stale release
-- found the first lock not stale.
CREATE OR REPLACE FUNCTION {{schema}}.release(p_names text[], p_tokens bigint[], p_ref text, p_stale bigint, p_events boolean,
    p_sample boolean)
 RETURNS SETOF {{schema}}.release_row
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $sleeplock$
#variable_conflict use_column
DECLARE
    o       {{schema}}.release_row;
    n       integer := cardinality(p_names);
    v_now   timestamptz;
    v_name  text;
    v_tok   bigint;
    i       integer;
    r       record;
BEGIN
    -- A name no definition covers: notfound, nothing changed.
    FOR i IN 1 .. n LOOP
        IF {{schema}}.slots_in({{schema}}.patterns(p_names[i])) IS NULL THEN
            o := ('notfound', i, p_names[i], 0, 0, 0, p_ref, '', 0, 0, 0, 1, 0)::{{schema}}.release_row;
            RETURN NEXT o;
            RETURN;
        END IF;
    END LOOP;
    IF n = 1 THEN
        PERFORM {{schema}}.spill(p_names[1]);
    ELSE
        PERFORM {{schema}}.lock_rows(p_names, false);
    END IF;
    v_now := clock_timestamp();
    IF p_stale IS NOT NULL THEN
        PERFORM 1 FROM {{schema}}.holders h
          WHERE h.lock = p_names[1] AND h.ref = p_ref AND (p_tokens[1] = 0 OR h.token = p_tokens[1])
            AND h.expires IS NOT NULL
            AND CASE WHEN p_stale > 0 THEN h.renewed + p_stale * interval '1 microsecond' <= v_now
                     ELSE h.expires <= v_now END;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        p_tokens := array_fill(0::bigint, ARRAY[n]);
    END IF;
    FOR i IN 1 .. n LOOP
        v_name := p_names[i];
        v_tok := p_tokens[i];
        FOR o IN SELECT * FROM {{schema}}.release_among_others(v_name, v_tok, p_ref, p_events, NULL, p_sample, NULL,
                                                              NULL, p_stale IS NOT NULL) LOOP
            o.r_idx := i;
            IF v_tok = 0 THEN -- not by the holder: tell its node
                PERFORM {{schema}}.lost(v_name, p_ref, o.r_token, CASE WHEN p_stale IS NULL THEN 'r' ELSE 's' END);
            END IF;
            RETURN NEXT o;
        END LOOP;
        CONTINUE WHEN FOUND;
        UPDATE {{schema}}.holders h SET count = h.count - 1
         WHERE h.lock = v_name AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok) AND h.count > 1
        RETURNING h.kind, h.token, h.weight INTO r;
        o := (CASE WHEN FOUND THEN 'decremented' ELSE 'notheld' END, i, v_name, 0,
              (SELECT coalesce(sum(h.weight), 0)::int FROM {{schema}}.holders h WHERE h.lock = v_name), 0, p_ref,
              coalesce(r.kind, ''), coalesce(r.token, 0), {{schema}}.micros(v_now), 0, coalesce(r.weight, 1),
              0)::{{schema}}.release_row;
        RETURN NEXT o;
    END LOOP;
END
$sleeplock$;

-- undo: gives up acquisition p_op after taking and spilling the rows: its
-- place in the queue goes, a grant it got is released (a row 'released'
-- with its Seq), a tombstone (cancelled) stops a statement of it still
-- running, and its idle rows are deleted.
CREATE OR REPLACE FUNCTION {{schema}}.undo(p_names text[], p_ref text, p_op bigint)
 RETURNS SETOF {{schema}}.release_row
 LANGUAGE plpgsql
AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM {{schema}}.lock_rows(p_names, false);
    v_now := clock_timestamp();
    INSERT INTO {{schema}}.cancelled (op, at) VALUES (p_op, v_now) ON CONFLICT DO NOTHING;
    DELETE FROM {{schema}}.cancelled c
     WHERE c.op IN (SELECT x.op FROM {{schema}}.cancelled x WHERE x.at < v_now - interval '1 hour' LIMIT 64);
    DELETE FROM {{schema}}.queue q USING {{schema}}.waiters w WHERE w.op = p_op AND q.ticket = w.ticket;
    DELETE FROM {{schema}}.waiters w WHERE w.op = p_op;
    UPDATE {{schema}}.holders h SET count = h.count - 1, op = NULL
     WHERE h.lock = ANY (p_names) AND h.ref = p_ref AND h.op = p_op AND h.count > 1;
    RETURN QUERY
        WITH gone AS (
            DELETE FROM {{schema}}.holders h
             WHERE h.lock = ANY (p_names) AND h.ref = p_ref AND h.op = p_op
            RETURNING h.lock, h.kind, h.token, {{schema}}.micros(v_now) - {{schema}}.micros(h.acquired) AS d, h.weight)
        SELECT 'released', array_position(p_names, g.lock), g.lock, 0, 0, 0, p_ref, g.kind, g.token,
               {{schema}}.micros(v_now), g.d, g.weight, nextval({{seqs}})
          FROM gone g CROSS JOIN LATERAL {{schema}}.tally(g.lock, 0, NULL, 1, 0, 0, g.d, {{schema}}.timed(g.token)) t;
    -- What this acquisition held or where it queued may be free now.
    PERFORM {{schema}}.wake(u, 1) FROM unnest(p_names) u
      WHERE EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = u);
    -- Its rows that are idle go (no holder, no queue; a fast row holding
    -- its lock's holder is not idle).
    DELETE FROM {{schema}}.locks l
     WHERE l.name = ANY (p_names) AND l.ref IS NULL
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = l.name)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = l.name);
END
$sleeplock$;

-- lost: tells the listeners that the hold (p_lock, p_ref, p_token) was
-- ended by another caller than its holder, p_why: 'r' released naming its
-- ref (no token), 's' released as stale, 'd' its lock deleted; delivered
-- when the transaction commits, so that the holder's store ends its lease
-- at once (a missed notification is learnt at the holder's next renewal).
-- Never sent on a holder's own release.
CREATE OR REPLACE FUNCTION {{schema}}.lost(p_lock text, p_ref text, p_token bigint, p_why text)
 RETURNS void
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    PERFORM pg_notify({{channel}}, concat_ws(E'\t', 'e', p_why, p_token::text, p_lock, p_ref));
END
$sleeplock$;

-- wake: tells the listeners that lock p_name may have p_free slots for
-- its waiters; delivered when the transaction commits.
CREATE OR REPLACE FUNCTION {{schema}}.wake(p_name text, p_free integer)
 RETURNS void
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    PERFORM pg_notify({{channel}}, greatest(p_free, 1)::text || ':' || p_name);
END
$sleeplock$;
