-- sleeplock schema, version 8: a release hands its slot over in fewer
-- statements, and to a waiter of its own node without a notification.
--
-- Versions 1 to 7 stay as they were. Placeholders as in 002.
--
-- Why: with callers queued, every grant is a release's handoff, and the
-- lock's row stays taken from the release's first statement to its commit:
-- the time of release_one() is the time between two grants. Version 6's
-- release_one() reaches its handoff through about 25 PL/pgSQL statements
-- (a spill, a failed DELETE for the case with nobody queued, a second
-- DELETE, the queue counted twice through functions, grant_heads()'s
-- loop): about 250 µs of server time on the test machine, more than the
-- grant and the release of a free lock together. And its notification
-- wakes the listener of every node, the releasing one included, although
-- the releasing node could hand a grant to its own waiter from the
-- statement's answer.
--
-- What changes:
--   - release_one() takes the node of the releasing store (p_node). It
--     reads the lock's row, under FOR UPDATE, with the queue's counts that
--     the queue's trigger keeps there (migration 003). When the lock is
--     slow, callers queue, every queued waiter has its node (unowned = 0)
--     and no node is stale, the rules of version 6 come down to: delete the
--     caller's hold, count the holders, answer, and grant the free slots to
--     the heads (hand_over()). Every other case is version 6's
--     release_one(), as before.
--   - hand_over() is grant_heads() (migration 005, see there for each rule)
--     with the head's queue row and waiter row deleted in one statement, no
--     slot search and no check of the head's own hold when nothing else
--     holds, and a grant to a waiter of node p_node answered as a row
--     'handed' (its payload in r_ref) instead of notified: the releasing
--     store hands it to its waiter once the statement has committed. A
--     waiter that the answer does not reach (the connection dropped after
--     the commit) finds its grant at its next check, as it does a lost
--     notification.
--   - Version 6's five-argument release_one() stays, for the processes of
--     versions 6 and 7 still running while the schema is upgraded.
--   - grant_heads(), which the other releases call, is hand_over() with no
--     node: one rule for every handoff, every grant notified.

-- Grant the free slots of lock p_name to the heads of its queue (see
-- above); the grants for waiters of node p_node are returned, not notified.
CREATE OR REPLACE FUNCTION {{schema}}.hand_over(p_name text, p_slots integer, p_run integer, p_wait integer,
                                                 p_now timestamptz, p_node bigint)
RETURNS SETOF text
LANGUAGE plpgsql AS $sleeplock$
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
               CASE WHEN x.expires = {{schema}}.owned()
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
        -- Not ours to grant (several locks, a waiter whose node stopped
        -- renewing it, a ref that already holds a slot): the waiter checks
        -- for itself.
        IF cardinality(w.locks) <> 1 OR NOT w.fresh
           OR (p_run > 0 AND EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.ref = w.ref)) THEN
            PERFORM {{schema}}.wake(p_name, v_free);
            EXIT;
        END IF;
        -- Nothing holds: slot 1 is free.
        IF p_run = 0 THEN
            v_slot := 1;
        ELSE
            SELECT s INTO v_slot FROM generate_series(1, p_slots) s
             WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.slot = s)
             ORDER BY s LIMIT 1;
            EXIT WHEN v_slot IS NULL;
        END IF;
        v_lease := CASE WHEN w.hold > 0 AND w.hold < w.ttl THEN w.hold ELSE w.ttl END;
        v_exp := CASE WHEN w.ttl > 0 THEN p_now + v_lease * interval '1 microsecond' END;
        v_renew := CASE WHEN w.ttl > 0 THEN p_now - (w.ttl - v_lease) * interval '1 microsecond' ELSE p_now END;
        v_tok := nextval({{tokens}});
        p_run := p_run + 1;
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
                                           op, handed, node)
            SELECT p_name, w.ref, w.kind, v_tok, v_slot, 1, p_now, v_renew, v_exp, w.ttl, w.hold, w.op, g.a, w.node
              FROM g
        )
        SELECT 'g ' || array_to_string(g.a, ' ') INTO v_msg FROM g;
        IF w.node IS NOT DISTINCT FROM p_node AND p_node IS NOT NULL THEN
            RETURN NEXT v_msg;
        ELSE
            PERFORM pg_notify({{channel}}, v_msg);
        END IF;
        v_free := v_free - 1;
    END LOOP;
END
$sleeplock$;

-- Grant the free slots of lock p_name to the heads of its queue, every
-- grant notified (version 5's grant_heads(), see there): hand_over() with
-- no node. Its callers ignore the count it returns, now 0.
CREATE OR REPLACE FUNCTION {{schema}}.grant_heads(p_name text, p_slots integer, p_run integer, p_wait integer,
                                                   p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    PERFORM {{schema}}.hand_over(p_name, p_slots, p_run, p_wait, p_now, NULL);
    RETURN 0;
END
$sleeplock$;

-- Release one lock for a store of node p_node (see above): version 6's
-- release_one(), with the handoff of a queued lock in fewer statements,
-- and the grants for waiters of p_node answered as rows 'handed'.
CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
                                                   p_pats text[], p_node bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now   timestamptz;
    v_slots integer;
    v_run   integer;
    l       record;
    r       record;
BEGIN
    SELECT x.fast, x.queued, x.unowned INTO l FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
    IF FOUND AND NOT l.fast AND l.queued > 0 AND l.unowned = 0 THEN
        v_now := clock_timestamp();
        -- Every waiter is its node's, and no node is stale: the queue's
        -- count is its live waiters (queue_counts()), and none is to be
        -- reaped or dropped.
        IF NOT {{schema}}.nodes_stale(v_now) THEN
            DELETE FROM {{schema}}.holders h
             WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token) AND h.count <= 1
            RETURNING h.kind, h.token, h.acquired INTO r;
            IF FOUND THEN
                SELECT count(*)::int INTO v_run FROM {{schema}}.holders h WHERE h.lock = p_name;
                v_slots := {{schema}}.slots_of(p_name);
                RETURN QUERY SELECT 'released'::text, 1, p_name, CASE WHEN p_events THEN v_slots ELSE 0 END, v_run,
                    l.queued, p_ref, r.kind, r.token, {{schema}}.micros(v_now),
                    {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), nextval({{seqs}});
                IF v_slots IS NOT NULL THEN
                    RETURN QUERY SELECT 'handed'::text, 1, p_name, 0, 0, 0, m, ''::text, 0::bigint, 0::bigint,
                                        0::bigint, 0::bigint
                                   FROM {{schema}}.hand_over(p_name, v_slots, v_run, l.queued, v_now, p_node) m;
                END IF;
                RETURN;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.release_one(p_name, p_token, p_ref, p_events, p_pats);
END
$sleeplock$;

-- Acquire one lock: version 7's acquire_slow(), with the queueing of a
-- caller behind others in fewer statements. A caller that will wait takes
-- the lock's row first, and the tombstone of its abandoned acquisition is
-- looked for after that (an undo() that had the row may have deleted it
-- meanwhile: acquire_rows() would then make a new row and grant it). When
-- the lock is slow, callers queue, every queued waiter has its node and no
-- node is stale, version 6's rule (acquire_rows()) comes down to: queue
-- the caller behind them when it holds no slot of the lock and the waiters
-- are at least its free slots. Every other case is version 7's, as
-- before.
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
#variable_conflict use_column
DECLARE
    v_now    timestamptz;
    v_slots  integer;
    v_ticket bigint;
    v_found  boolean := false;
    l        record;
    f        record;
BEGIN
    IF p_wait THEN
        -- A caller that will wait takes the lock's row first: it queues
        -- under it, or else acquire_rows() decides under it.
        SELECT x.fast, x.queued, x.unowned INTO l FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
        v_found := FOUND;
    END IF;
    -- Checked after the row is ours: the tombstone of an undo() that had
    -- the row before us (undo() takes it) is seen now, whatever that undo
    -- left of the row.
    IF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
        RETURN QUERY SELECT 'cancelled'::text, 1, p_name, 0, 0, 0, p_ref, p_kind, 0::bigint,
            {{schema}}.micros(clock_timestamp()), 0::bigint, 0::bigint, false, 0::bigint, 0::bigint, 0::bigint,
            0::bigint;
        RETURN;
    END IF;
    IF p_wait THEN
        IF v_found AND NOT l.fast AND l.queued > 0 AND l.unowned = 0 THEN
            v_slots := {{schema}}.slots_in(p_pats);
            v_now := clock_timestamp();
            IF v_slots IS NOT NULL AND NOT {{schema}}.nodes_stale(v_now) THEN
                SELECT count(*)::int AS n,
                       (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > v_now))::int AS live,
                       coalesce(bool_or(h.ref = p_ref), false) AS mine
                  INTO f
                  FROM {{schema}}.holders h WHERE h.lock = p_name;
                IF NOT f.mine AND l.queued >= v_slots - f.live THEN
                    PERFORM {{schema}}.node_up(p_node, p_wttl, v_now);
                    v_ticket := nextval({{tickets}});
                    INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires,
                                                   wttl, node)
                    VALUES (v_ticket, p_op, p_ref, p_kind, ARRAY[p_name], p_ttl, p_hold, p_counted, v_now,
                            {{schema}}.owned(), p_wttl, p_node);
                    INSERT INTO {{schema}}.queue (lock, ticket, own) VALUES (p_name, v_ticket, true);
                    PERFORM {{schema}}.soft();
                    RETURN QUERY SELECT 'queued'::text, 1, p_name, v_slots, f.n, l.queued + 1, p_ref, p_kind,
                        0::bigint, {{schema}}.micros(v_now), 0::bigint, 0::bigint, false, v_ticket, 0::bigint,
                        0::bigint, nextval({{seqs}});
                    RETURN;
                END IF;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.acquire_rows(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op,
                                                        p_wttl, p_pats, p_lease, p_back, p_node);
END
$sleeplock$;
