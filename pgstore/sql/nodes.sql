-- Waiter liveness: a store's waiters of one lock live as long as its row in
-- nodes, renewed by node_beat(); the waiters of a node whose lease ran out
-- are reaped (reap()) by the statements that meet them, or swept. The
-- queue's counts in the lock's row are kept by the trigger track_queue_counts.

-- drop_waiter: gives up the place in the queue of acquisition p_op, whose
-- caller abandoned it but whose undo() could not reach the database: its
-- store's heartbeat runs this until it can. Only the place goes (and a
-- tombstone stops a statement of it still running): a slot it may have
-- been granted is left to its TTL, as the caller was told. Returns the
-- waiter rows deleted.
CREATE OR REPLACE FUNCTION {{schema}}.drop_waiter(p_op bigint)
 RETURNS integer
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_locks text[];
    v_n     integer;
BEGIN
    INSERT INTO {{schema}}.cancelled (op, at) VALUES (p_op, clock_timestamp()) ON CONFLICT DO NOTHING;
    SELECT w.locks INTO v_locks FROM {{schema}}.waiters w WHERE w.op = p_op;
    IF v_locks IS NULL THEN
        RETURN 0;
    END IF;
    -- the locks' rows first, as every other writer of their queues
    PERFORM {{schema}}.lock_rows(v_locks, false);
    DELETE FROM {{schema}}.queue q USING {{schema}}.waiters w WHERE w.op = p_op AND q.ticket = w.ticket;
    DELETE FROM {{schema}}.waiters w WHERE w.op = p_op;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM {{schema}}.wake(u, 1) FROM unnest(v_locks) u
      WHERE EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = u);
    RETURN v_n;
END
$sleeplock$;

-- node_beat: the heartbeat of node p_node: renews its row (the lease of
-- its waiters of one lock) when less than 60 % of it is left, and the
-- leases of p_several, the acquisitions of its waiters of several locks;
-- p_locks and p_refs are the (lock, ref) of the grants its waiters took
-- since the last beat, which stop being the node's. Returns the rows
-- written. Waiter leases are soft state: the beat commits asynchronously
-- (synchronous_commit off), so the listener's connection, which runs it
-- between notifications, never waits for a WAL flush.
CREATE OR REPLACE FUNCTION {{schema}}.node_beat(p_node bigint, p_wttl bigint, p_several bigint[], p_locks text[], p_refs text[])
 RETURNS bigint
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_old timestamptz;
    v_n   bigint := 0;
    v_k   bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    SELECT n.expires INTO v_old FROM {{schema}}.nodes n WHERE n.id = p_node;
    IF v_old IS NULL OR v_old < v_now + (p_wttl * 6 / 10) * interval '1 microsecond' THEN
        INSERT INTO {{schema}}.nodes (id, expires, wttl)
        VALUES (p_node, v_now + p_wttl * interval '1 microsecond', p_wttl)
        ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, wttl = excluded.wttl;
        v_n := 1;
    END IF;
    IF cardinality(p_several) > 0 THEN
        -- The waiters of several locks, whose leases are their own.
        UPDATE {{schema}}.waiters w SET expires = v_now + p_wttl * interval '1 microsecond', wttl = p_wttl
         WHERE w.op = ANY (p_several) AND w.expires > v_now
           AND w.expires < v_now + (p_wttl * 6 / 10) * interval '1 microsecond';
        GET DIAGNOSTICS v_k = ROW_COUNT;
        v_n := v_n + v_k;
    END IF;
    IF cardinality(p_locks) > 0 THEN
        UPDATE {{schema}}.holders h SET node = NULL
          FROM unnest(p_locks, p_refs) u(l, r)
         WHERE h.lock = u.l AND h.ref = u.r AND h.node = p_node;
        GET DIAGNOSTICS v_k = ROW_COUNT;
        v_n := v_n + v_k;
    END IF;
    RETURN v_n;
END
$sleeplock$;

-- node_waiters: the acquisitions of node p_node's waiters of one lock,
-- whose places live as long as the node. Its store gives up those it no
-- longer waits for: a dequeue lost in a crash or an asynchronous failover
-- (commits made with synchronous_commit off, or not replicated) brings back a place that
-- nobody takes, which would block its queue for as long as the node lives.
CREATE OR REPLACE FUNCTION {{schema}}.node_waiters(p_node bigint)
 RETURNS bigint[]
 LANGUAGE sql
 STABLE
AS $sleeplock$
    SELECT coalesce(array_agg(w.op), '{}') FROM {{schema}}.waiters w
     WHERE w.node = p_node AND w.expires = {{schema}}.node_lease_sentinel()
$sleeplock$;

-- nodes_stale: whether some node has less than 30 % of its lease left (or
-- lost it). PL/pgSQL, like every helper on a hot path: it keeps its plan
-- for the session.
CREATE OR REPLACE FUNCTION {{schema}}.nodes_stale(p_now timestamp with time zone)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
BEGIN
    RETURN EXISTS (SELECT 1 FROM {{schema}}.nodes n
                    WHERE n.expires < p_now + (n.wttl * 3 / 10) * interval '1 microsecond');
END
$sleeplock$;

-- node_lease_sentinel: the expires of a waiter row whose lease is its node's.
CREATE OR REPLACE FUNCTION {{schema}}.node_lease_sentinel()
 RETURNS timestamp with time zone
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
    SELECT timestamptz '9999-12-31 00:00:00+00'
$sleeplock$;

-- track_queue_counts: the trigger on queue that keeps locks.queued and
-- locks.unowned, and the invariant of fast (a lock with a queue row is not
-- fast): every statement that queues has spilled the lock's row already; a
-- queue row written by anything else spills it here. Every writer of a
-- lock's queue holds the lock's row, so this update waits for nobody.
CREATE OR REPLACE FUNCTION {{schema}}.track_queue_counts()
 RETURNS trigger
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF EXISTS (SELECT 1 FROM {{schema}}.locks l WHERE l.name = NEW.lock AND l.fast) THEN
            PERFORM {{schema}}.spill(NEW.lock);
        END IF;
        -- (a queue row without its lock's row, which no statement of
        -- sleeplock makes, gets one: the counts are then right)
        INSERT INTO {{schema}}.locks AS l (name, queued, unowned)
        VALUES (NEW.lock, 1, CASE WHEN NEW.own THEN 0 ELSE 1 END)
        ON CONFLICT (name) DO UPDATE
            SET queued = l.queued + 1, unowned = l.unowned + CASE WHEN NEW.own THEN 0 ELSE 1 END;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE {{schema}}.locks l
           SET queued = l.queued - 1, unowned = l.unowned - CASE WHEN OLD.own THEN 0 ELSE 1 END
         WHERE l.name = OLD.lock;
    ELSIF NEW.own IS DISTINCT FROM OLD.own THEN
        UPDATE {{schema}}.locks l SET unowned = l.unowned + CASE WHEN NEW.own THEN -1 ELSE 1 END
         WHERE l.name = NEW.lock;
    END IF;
    RETURN NULL;
END
$sleeplock$;
CREATE OR REPLACE TRIGGER track_queue_counts AFTER INSERT OR DELETE OR UPDATE OF own ON {{schema}}.queue
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.track_queue_counts();

-- waiter_counts: the live and the dead waiters of lock n: from the lock's
-- row while no node is stale and every waiter in its queue is a node's;
-- else a count of the queue, each waiter judged by its own lease or its
-- node's.
CREATE OR REPLACE FUNCTION {{schema}}.waiter_counts(n text, p_now timestamp with time zone, OUT r_live integer, OUT r_dead integer)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
DECLARE
    v_q integer;
    v_u integer;
BEGIN
    IF NOT {{schema}}.nodes_stale(p_now) THEN
        SELECT l.queued, l.unowned INTO v_q, v_u FROM {{schema}}.locks l WHERE l.name = n;
        IF NOT FOUND OR v_u = 0 THEN
            -- (no row: no queue, as every waiter has its lock's row)
            r_live := coalesce(v_q, 0);
            r_dead := 0;
            RETURN;
        END IF;
        SELECT (count(*) FILTER (WHERE w.expires > p_now))::int, (count(*) FILTER (WHERE w.expires <= p_now))::int
          INTO r_live, r_dead
          FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket WHERE q.lock = n;
        RETURN;
    END IF;
    SELECT (count(*) FILTER (WHERE x.live))::int, (count(*) FILTER (WHERE NOT x.live))::int
      INTO r_live, r_dead
      FROM (SELECT w.expires > p_now AND (w.expires <> {{schema}}.node_lease_sentinel() OR d.expires > p_now) AS live
              FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
              LEFT JOIN {{schema}}.nodes d ON d.id = w.node
             WHERE q.lock = n) x;
END
$sleeplock$;

-- reap: under lock p_name's row, its waiters whose node's lease ran out,
-- or whose node has no row, take their node's expiry (p_now for no row)
-- into their own, and so do its unconfirmed grants (holders.node): they
-- are then dead as any waiter whose lease ran out. A node that is only
-- late is left alone. Without p_force, nothing is read unless
-- nodes_stale(). Returns how many rows were reaped.
CREATE OR REPLACE FUNCTION {{schema}}.reap(p_name text, p_now timestamp with time zone, p_force boolean)
 RETURNS integer
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_n integer;
    v_k integer;
BEGIN
    IF NOT p_force AND NOT {{schema}}.nodes_stale(p_now) THEN
        RETURN 0;
    END IF;
    -- (their queue rows say so: see locks.unowned)
    WITH r AS (
        UPDATE {{schema}}.waiters w SET expires = v.e, wttl = v.t
          FROM (SELECT x.ticket, coalesce(n.expires, p_now) AS e, coalesce(n.wttl, x.wttl) AS t
                  FROM {{schema}}.queue q
                  JOIN {{schema}}.waiters x ON x.ticket = q.ticket
                  LEFT JOIN {{schema}}.nodes n ON n.id = x.node
                 WHERE q.lock = p_name AND x.node IS NOT NULL AND x.expires = {{schema}}.node_lease_sentinel()
                   AND (n.id IS NULL OR n.expires <= p_now)) v
         WHERE w.ticket = v.ticket
        RETURNING w.ticket)
    UPDATE {{schema}}.queue q SET own = false FROM r WHERE q.ticket = r.ticket AND q.own;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE {{schema}}.holders h SET expires = v.e
      FROM (SELECT x.ref, coalesce(n.expires, p_now) AS e
              FROM {{schema}}.holders x LEFT JOIN {{schema}}.nodes n ON n.id = x.node
             WHERE x.lock = p_name AND x.node IS NOT NULL AND (n.id IS NULL OR n.expires <= p_now)
               AND (x.expires IS NULL OR x.expires > coalesce(n.expires, p_now))) v
     WHERE h.lock = p_name AND h.ref = v.ref;
    GET DIAGNOSTICS v_k = ROW_COUNT;
    RETURN v_n + v_k;
END
$sleeplock$;

-- sweep_nodes: the waiters of nodes whose row expired, or is gone, that no
-- operation met: a bounded number of their locks are reaped and their dead
-- dropped, then the expired nodes that own no waiter go. Returns the rows
-- deleted.
CREATE OR REPLACE FUNCTION {{schema}}.sweep_nodes(p_limit integer)
 RETURNS integer
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_n   integer := 0;
    v_k   integer;
    v_l   text;
BEGIN
    FOR v_l IN
        (SELECT DISTINCT q.lock FROM {{schema}}.waiters w
           JOIN {{schema}}.queue q ON q.ticket = w.ticket
           LEFT JOIN {{schema}}.nodes n ON n.id = w.node
          WHERE w.node IS NOT NULL AND w.expires = {{schema}}.node_lease_sentinel() AND (n.id IS NULL OR n.expires <= v_now)
          LIMIT p_limit)
        UNION
        (SELECT DISTINCT h.lock FROM {{schema}}.holders h
           LEFT JOIN {{schema}}.nodes n ON n.id = h.node
          WHERE h.node IS NOT NULL AND (n.id IS NULL OR n.expires <= v_now)
            AND (h.expires IS NULL OR h.expires > coalesce(n.expires, v_now))
          LIMIT p_limit)
    LOOP
        -- the lock's row first, as every other writer of its queue
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = v_l FOR UPDATE SKIP LOCKED;
        IF FOUND OR NOT EXISTS (SELECT 1 FROM {{schema}}.locks l WHERE l.name = v_l) THEN
            PERFORM {{schema}}.reap(v_l, v_now, true);
            v_n := v_n + {{schema}}.drop_dead(v_l, v_now, p_limit);
        END IF;
    END LOOP;
    DELETE FROM {{schema}}.nodes n
     WHERE n.id IN (SELECT x.id FROM {{schema}}.nodes x
                     WHERE x.expires <= v_now
                       AND NOT EXISTS (SELECT 1 FROM {{schema}}.waiters w
                                        WHERE w.node = x.id AND w.expires = {{schema}}.node_lease_sentinel())
                       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h
                                        WHERE h.node = x.id AND (h.expires IS NULL OR h.expires > x.expires))
                     LIMIT p_limit)
       AND n.expires <= v_now;
    GET DIAGNOSTICS v_k = ROW_COUNT;
    RETURN v_n + v_k;
END
$sleeplock$;

-- waiter_live: whether a waiter row (its expires and node) is live at
-- p_now: its own lease, or, for a node's waiter, its node's. For readers
-- (the counts of events and State), which reap nothing.
CREATE OR REPLACE FUNCTION {{schema}}.waiter_live(p_expires timestamp with time zone, p_node bigint, p_now timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $sleeplock$
    SELECT p_expires > p_now
       AND (p_expires <> {{schema}}.node_lease_sentinel()
            OR EXISTS (SELECT 1 FROM {{schema}}.nodes n WHERE n.id = p_node AND n.expires > p_now))
$sleeplock$;
