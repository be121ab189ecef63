-- sleeplock schema, version 5: a waiter lives as long as its node.
--
-- Versions 1 to 4 stay as they were released. Placeholders as in 002.
--
-- Why: up to version 4 each waiter row had a lease of its own, which its
-- node renewed (a write per waiter about twice a second): with 1,000
-- callers waiting, 2,000 row updates a second, several per cent of a
-- core of the server's CPU spent keeping idle callers in line.
--
-- What changes:
--   - nodes: one row per store that has waited (its id is drawn by the
--     store at New), with the lease of all its waiters: expires, renewed
--     by the store's heartbeat when less than 60 % of wttl is left, so a
--     live node never falls below ~35 %. Deleted by the store's Close, or
--     by sweep_nodes() once it has expired and owns no waiter.
--   - waiters.node: the node whose row is the waiter's lease. A waiter of
--     one lock queued by this version is its node's: its row carries
--     expires = owned() (far in the future), so every reader of a waiter's
--     liveness (acquire(), drop_dead(), the counts) takes it as live with
--     no change. NULL for a waiter of several locks, which keeps a lease of
--     its own, renewed per row as before (heartbeat()), and for rows
--     queued before the upgrade.
--   - A node that stops renewing (died, paused) is judged by its row, as
--     a waiter was by its own in version 4: a release does not hand its
--     waiters a slot once less than 30 % of its lease is left
--     (grant_heads() reads the node's row), a try does not jump them while
--     it lives, and once its lease ran out they are dead. reap() is what
--     makes them so for the statements that judge a queue by the waiter
--     rows alone: under a lock's row, the waiters of a node whose lease
--     ran out (or that has no row) take its expiry into their own row, and
--     are then skipped and deleted. Every statement that judges a queue
--     reaps it first (release_one(), drop_dead(), check_one(), the
--     acquire_one() paths that call acquire()), and only while
--     some node row is stale (nodes_stale(): a read of the small nodes
--     table), so the common paths pay one read of a few rows. A node that
--     is only late is never reaped: when it renews, its waiters are as
--     they were.
--   - node_beat(): the heartbeat. It renews the node's row (one row, not
--     one per waiter) and the leases of its waiters of several locks.
--   - holders.node: a slot a release handed to a node's waiter stays its
--     node's until the node confirms that its waiter took it (the next
--     heartbeat, within a quarter lease, clears it). A node that dies in
--     between (it may have died a moment before the release, while its
--     row was still fresh) has its grant end with its lease: reap() gives
--     such a holder its dead node's expiry, and the slot is taken over
--     like any expired holder's. Up to version 4 that slot stayed held for
--     the whole lease TTL of a caller that never learned it had it.
--   - locks.queued and locks.unowned: the number of the lock's queue rows
--     (dead waiters included), and of those whose waiter keeps a lease of
--     its own (queue.own false: a waiter of several locks, one queued
--     before the upgrade, one reaped), kept by a trigger on queue. Every
--     writer of a lock's queue holds the lock's row already, so the
--     trigger's update of it waits for nobody. While no node is stale and
--     unowned is 0, every waiter in the queue is live, and queue_counts()
--     reads the lock's row instead of the whole queue: a release that
--     hands a slot over, a queueing and the events' counts stop costing
--     O(waiters) (with 1,000 waiters, 0.4 ms a statement).
--   - sweep_nodes(): waiters of expired (or missing) nodes that nothing
--     met go, and their unconfirmed grants end, a bounded number per call;
--     then expired nodes that own no waiter go.
--   - check_one(): a waiter's check of a lock full of unexpired holders,
--     while no node is stale, is answered 'waiting' on the holder rows
--     alone (what acquire() would answer after counting the queue): the
--     periodic checks of the heads of each store's queue were most of the
--     server's work while 1,000 callers waited.

CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.nodes (
    id      bigint      PRIMARY KEY,
    expires timestamptz NOT NULL,
    wttl    bigint      NOT NULL    -- the waiter lease, µs
) WITH (fillfactor = 50);

ALTER TABLE {{schema}}.waiters ADD COLUMN IF NOT EXISTS node bigint;
ALTER TABLE {{schema}}.holders ADD COLUMN IF NOT EXISTS node bigint;

-- locks.queued and locks.unowned (see above), counted once for the rows of
-- an upgraded schema (whose waiters all keep their own leases); room on
-- the page for the trigger's HOT updates.
ALTER TABLE {{schema}}.queue ADD COLUMN IF NOT EXISTS own boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS queued integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS unowned integer NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.locks SET (fillfactor = 50);
UPDATE {{schema}}.locks l SET queued = c.n, unowned = c.u
  FROM (SELECT q.lock, count(*)::int AS n, (count(*) FILTER (WHERE NOT q.own))::int AS u
          FROM {{schema}}.queue q GROUP BY q.lock) c
 WHERE l.name = c.lock;

CREATE OR REPLACE FUNCTION {{schema}}.queue_count() RETURNS trigger
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    IF TG_OP = 'INSERT' THEN
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
DROP TRIGGER IF EXISTS queue_count ON {{schema}}.queue;
CREATE TRIGGER queue_count AFTER INSERT OR DELETE OR UPDATE OF own ON {{schema}}.queue
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.queue_count();

-- The expires of a waiter row whose lease is its node's.
CREATE OR REPLACE FUNCTION {{schema}}.owned() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $sleeplock$
    SELECT timestamptz '9999-12-31 00:00:00+00'
$sleeplock$;

-- Whether some node has less than 30 % of its lease left (or lost it).
-- PL/pgSQL, like every helper on a hot path: it keeps its plan for the
-- session, where a SQL function called from PL/pgSQL is planned again in
-- every transaction.
CREATE OR REPLACE FUNCTION {{schema}}.nodes_stale(p_now timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE AS $sleeplock$
BEGIN
    RETURN EXISTS (SELECT 1 FROM {{schema}}.nodes n
                    WHERE n.expires < p_now + (n.wttl * 3 / 10) * interval '1 microsecond');
END
$sleeplock$;

-- Make sure node p_node has a row that is not stale, before a waiter of it
-- is queued; no write while it has more than 30 % of its lease left.
CREATE OR REPLACE FUNCTION {{schema}}.node_up(p_node bigint, p_wttl bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    PERFORM 1 FROM {{schema}}.nodes n
      WHERE n.id = p_node AND n.expires >= p_now + (p_wttl * 3 / 10) * interval '1 microsecond';
    IF NOT FOUND THEN
        INSERT INTO {{schema}}.nodes (id, expires, wttl)
        VALUES (p_node, p_now + p_wttl * interval '1 microsecond', p_wttl)
        ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, wttl = excluded.wttl;
    END IF;
END
$sleeplock$;

-- The heartbeat of node p_node (see above): p_legacy, the acquisitions of
-- its waiters of several locks; p_locks and p_refs, the (lock, ref) of the
-- grants its waiters took since the last beat, which stop being the
-- node's. Returns the rows written.
CREATE OR REPLACE FUNCTION {{schema}}.node_beat(p_node bigint, p_wttl bigint, p_legacy bigint[], p_locks text[],
                                                 p_refs text[])
RETURNS bigint
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_old timestamptz;
    v_n   bigint := 0;
    v_k   bigint;
BEGIN
    SELECT n.expires INTO v_old FROM {{schema}}.nodes n WHERE n.id = p_node;
    IF v_old IS NULL OR v_old < v_now + (p_wttl * 6 / 10) * interval '1 microsecond' THEN
        INSERT INTO {{schema}}.nodes (id, expires, wttl)
        VALUES (p_node, v_now + p_wttl * interval '1 microsecond', p_wttl)
        ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, wttl = excluded.wttl;
        v_n := 1;
    END IF;
    IF cardinality(p_legacy) > 0 THEN
        v_n := v_n + (SELECT count(*) FROM {{schema}}.heartbeat(p_legacy, p_wttl));
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

-- Under lock p_name's row: its waiters whose node's lease ran out, or
-- whose node has no row, take their node's expiry (p_now for no row) into
-- their own, and so do its unconfirmed grants (holders.node). They are
-- then dead as any waiter whose lease ran out. A node that is only late
-- is left alone: its waiters stay live, and grant_heads() judges their
-- freshness by the node's row. Without p_force, nothing is read unless
-- nodes_stale(). Returns how many rows were reaped.
CREATE OR REPLACE FUNCTION {{schema}}.reap(p_name text, p_now timestamptz, p_force boolean) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
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
                 WHERE q.lock = p_name AND x.node IS NOT NULL AND x.expires = {{schema}}.owned()
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

-- Reap the queues of p_names (see reap()) before a statement that judges
-- them without their rows (acquire()'s first pass): only while some node
-- is stale, and then under their rows, taken in acquire()'s order.
CREATE OR REPLACE FUNCTION {{schema}}.reap_locked(p_names text[]) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_now  timestamptz := clock_timestamp();
    v_name text;
BEGIN
    IF NOT {{schema}}.nodes_stale(v_now) THEN
        RETURN;
    END IF;
    PERFORM {{schema}}.lock_existing(p_names);
    FOREACH v_name IN ARRAY p_names LOOP
        PERFORM {{schema}}.reap(v_name, v_now, true);
    END LOOP;
END
$sleeplock$;

-- Whether acquisition p_op is queued; a waiter of one lock queued by
-- acquire() becomes its node's (see above). The caller holds the lock's
-- row.
CREATE OR REPLACE FUNCTION {{schema}}.own(p_op bigint, p_node bigint, p_wttl bigint) RETURNS boolean
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    w record;
BEGIN
    SELECT x.ticket, x.node, cardinality(x.locks) AS n INTO w FROM {{schema}}.waiters x WHERE x.op = p_op;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF w.node IS NULL AND w.n = 1 AND p_node <> 0 THEN
        PERFORM {{schema}}.node_up(p_node, p_wttl, clock_timestamp());
        UPDATE {{schema}}.waiters x SET node = p_node, expires = {{schema}}.owned(), wttl = p_wttl
         WHERE x.ticket = w.ticket;
        UPDATE {{schema}}.queue q SET own = true WHERE q.ticket = w.ticket;
    END IF;
    RETURN true;
END
$sleeplock$;

-- Give up the place in the queue of acquisition p_op, whose caller
-- abandoned it but whose undo() could not reach the database: its store's
-- heartbeat runs this until it can, as the waiter row would otherwise live
-- as long as the node. Only the place goes (and a tombstone stops a
-- statement of it still running): a slot it may have been granted is left
-- to its TTL, as the caller was told, since its ref may hold that slot
-- again by now. Returns the waiter rows deleted.
CREATE OR REPLACE FUNCTION {{schema}}.drop_waiter(p_op bigint) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
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
    PERFORM {{schema}}.lock_existing(v_locks);
    DELETE FROM {{schema}}.queue q USING {{schema}}.waiters w WHERE w.op = p_op AND q.ticket = w.ticket;
    DELETE FROM {{schema}}.waiters w WHERE w.op = p_op;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM {{schema}}.wake(u, 1) FROM unnest(v_locks) u
      WHERE EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = u);
    RETURN v_n;
END
$sleeplock$;

-- Waiters of nodes whose row expired, or is gone, that no operation met:
-- a bounded number of their locks are reaped and their dead dropped, then
-- the expired nodes that own no waiter go. Returns the rows deleted.
CREATE OR REPLACE FUNCTION {{schema}}.sweep_nodes(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
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
          WHERE w.node IS NOT NULL AND w.expires = {{schema}}.owned() AND (n.id IS NULL OR n.expires <= v_now)
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
                                        WHERE w.node = x.id AND w.expires = {{schema}}.owned())
                       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h
                                        WHERE h.node = x.id AND (h.expires IS NULL OR h.expires > x.expires))
                     LIMIT p_limit)
       AND n.expires <= v_now;
    GET DIAGNOSTICS v_k = ROW_COUNT;
    RETURN v_n + v_k;
END
$sleeplock$;

-- Whether a waiter row (its expires and node) is live at p_now: its own
-- lease, or, for a node's waiter, its node's. For what only reads (the
-- counts of events and State), which reaps nothing.
CREATE OR REPLACE FUNCTION {{schema}}.waiter_live(p_expires timestamptz, p_node bigint, p_now timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $sleeplock$
    SELECT p_expires > p_now
       AND (p_expires <> {{schema}}.owned()
            OR EXISTS (SELECT 1 FROM {{schema}}.nodes n WHERE n.id = p_node AND n.expires > p_now))
$sleeplock$;

-- The live and the dead waiters of lock n: from the lock's row while no
-- node is stale and every waiter in its queue is a node's (each is then
-- live: see locks.unowned); else a count of the queue, each waiter judged
-- by its own lease or its node's.
CREATE OR REPLACE FUNCTION {{schema}}.queue_counts(n text, p_now timestamptz, OUT r_live integer, OUT r_dead integer)
LANGUAGE plpgsql STABLE AS $sleeplock$
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
      FROM (SELECT w.expires > p_now AND (w.expires <> {{schema}}.owned() OR d.expires > p_now) AS live
              FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
              LEFT JOIN {{schema}}.nodes d ON d.id = w.node
             WHERE q.lock = n) x;
END
$sleeplock$;

-- The live waiters of lock n (see queue_counts()).
CREATE OR REPLACE FUNCTION {{schema}}.waiting_of(n text, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql STABLE AS $sleeplock$
BEGIN
    RETURN ({{schema}}.queue_counts(n, p_now)).r_live;
END
$sleeplock$;

-- The state of locks (version 1's states(), see there), with
-- waiter_live().
CREATE OR REPLACE FUNCTION {{schema}}.states(p_name text, p_detail boolean)
RETURNS TABLE (r_name text, r_slots integer, r_family boolean, r_running integer, r_waiting integer,
               r_now bigint, r_holders text, r_queue text)
LANGUAGE plpgsql STABLE AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_name   text;
    v_slots  integer;
    v_family boolean;
BEGIN
    FOR v_name IN
        SELECT p_name WHERE p_name IS NOT NULL
        UNION SELECT d.name FROM {{schema}}.defs d WHERE p_name IS NULL
        UNION SELECT h.lock FROM {{schema}}.holders h WHERE p_name IS NULL
        UNION SELECT q.lock FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
               WHERE p_name IS NULL AND {{schema}}.waiter_live(w.expires, w.node, v_now)
    LOOP
        SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_name AND d.family;
        v_family := FOUND;
        IF NOT v_family THEN
            v_slots := {{schema}}.slots_of(v_name);
            CONTINUE WHEN v_slots IS NULL;
        END IF;
        r_name := v_name;
        r_slots := v_slots;
        r_family := v_family;
        r_now := {{schema}}.micros(v_now);
        r_holders := NULL;
        r_queue := NULL;
        IF v_family THEN
            r_running := 0;
            r_waiting := 0;
        ELSE
            r_running := {{schema}}.running_of(v_name);
            r_waiting := {{schema}}.waiting_of(v_name, v_now);
            IF p_detail THEN
                SELECT json_agg(json_build_object(
                        'ref', h.ref, 'kind', h.kind, 'token', h.token, 'count', h.count,
                        'acquired', {{schema}}.micros(h.acquired), 'renewed', {{schema}}.micros(h.renewed),
                        'expires', {{schema}}.micros(h.expires)) ORDER BY h.token)::text
                  INTO r_holders
                  FROM {{schema}}.holders h WHERE h.lock = v_name;
                SELECT json_agg(json_build_object(
                        'ref', w.ref, 'kind', w.kind, 'since', {{schema}}.micros(w.since), 'locks', w.locks)
                        ORDER BY q.ticket)::text
                  INTO r_queue
                  FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
                 WHERE q.lock = v_name AND {{schema}}.waiter_live(w.expires, w.node, v_now);
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$sleeplock$;

-- Delete dead waiters of lock p_name (version 2's drop_dead()), after
-- reaping its queue; only its own queue rows.
CREATE OR REPLACE FUNCTION {{schema}}.drop_dead(p_name text, p_now timestamptz, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
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

-- Grant the free slots of lock p_name to the head of its queue: version
-- 4's grant_heads() (see there), but a grant to a node's waiter is its
-- node's (holders.node) until the node confirms it.
CREATE OR REPLACE FUNCTION {{schema}}.grant_heads(p_name text, p_slots integer, p_run integer, p_wait integer,
                                                   p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_free  integer := p_slots - p_run;
    v_n     integer := 0;
    v_slot  integer;
    v_lease bigint;
    v_exp   timestamptz;
    v_renew timestamptz;
    v_tok   bigint;
    v_seq   bigint;
    g       bigint[];
    w       record;
BEGIN
    IF v_free <= 0 THEN
        RETURN 0;
    END IF;
    -- Waiters whose lease ran out do not count (as in acquire()); they are
    -- left to drop_dead() and sweep().
    FOR w IN SELECT x.ticket, x.op, x.ref, x.kind, x.locks, x.ttl, x.hold, x.since, x.node,
                    CASE WHEN x.expires = {{schema}}.owned()
                         -- a node's waiter: its node's lease
                         THEN coalesce(n.expires > p_now + (n.wttl * 3 / 10) * interval '1 microsecond', false)
                         ELSE {{schema}}.micros(x.expires) - {{schema}}.micros(p_now)
                                > coalesce(x.wttl, {{schema}}.micros(x.expires) - {{schema}}.micros(x.since)) * 3 / 10
                    END AS fresh
               FROM {{schema}}.queue q JOIN {{schema}}.waiters x ON x.ticket = q.ticket
               LEFT JOIN {{schema}}.nodes n ON n.id = x.node
              WHERE q.lock = p_name AND x.expires > p_now
              ORDER BY q.ticket
              LIMIT v_free
    LOOP
        IF cardinality(w.locks) <> 1 OR NOT w.fresh
           OR EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.ref = w.ref) THEN
            -- Not ours to grant: the waiter checks for itself (and a
            -- waiter whose node stopped renewing it is not handed a slot
            -- its TTL would hold: see waiters.wttl).
            PERFORM {{schema}}.wake(p_name, v_free);
            EXIT;
        END IF;
        SELECT s INTO v_slot FROM generate_series(1, p_slots) s
         WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.slot = s)
         ORDER BY s LIMIT 1;
        EXIT WHEN v_slot IS NULL;
        -- the lease as acquire() computes it
        v_lease := CASE WHEN w.hold > 0 AND w.hold < w.ttl THEN w.hold ELSE w.ttl END;
        v_exp := CASE WHEN w.ttl > 0 THEN p_now + v_lease * interval '1 microsecond' END;
        v_renew := CASE WHEN w.ttl > 0 THEN p_now - (w.ttl - v_lease) * interval '1 microsecond' ELSE p_now END;
        v_tok := nextval({{tokens}});
        v_seq := nextval({{seqs}});
        p_run := p_run + 1;
        p_wait := p_wait - 1;
        g := ARRAY[w.op, w.ticket, v_tok, {{schema}}.micros(p_now), {{schema}}.micros(v_exp), v_seq,
                   p_slots::bigint, p_run::bigint, p_wait::bigint,
                   {{schema}}.micros(p_now) - {{schema}}.micros(w.since)];
        INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold, op,
                                       handed, node)
        VALUES (p_name, w.ref, w.kind, v_tok, v_slot, 1, p_now, v_renew, v_exp, w.ttl, w.hold, w.op, g, w.node);
        DELETE FROM {{schema}}.queue q WHERE q.ticket = w.ticket;
        DELETE FROM {{schema}}.waiters x WHERE x.ticket = w.ticket;
        PERFORM pg_notify({{channel}}, 'g ' || array_to_string(g, ' '));
        v_n := v_n + 1;
        v_free := v_free - 1;
    END LOOP;
    RETURN v_n;
END
$sleeplock$;

-- Release one lock: version 4's release_one() (see there), reaping the
-- queue before it counts and hands over.
CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
                                                   p_pats text[])
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now   timestamptz;
    v_seq   bigint;
    v_slots integer;
    v_run   integer;
    v_wait  integer;
    v_dead  integer;
    r       record;
BEGIN
    PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_name FOR UPDATE;
    IF FOUND THEN
        -- No other holder or waiter can appear while the row is ours.
        -- The common case first, as in version 3: the lock's only hold, and
        -- nobody queues.
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
        -- Other holders or waiters remain.
        DELETE FROM {{schema}}.holders h
         WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token) AND h.count <= 1
        RETURNING h.kind, h.token, h.acquired INTO r;
        IF FOUND THEN
            v_now := clock_timestamp();
            v_seq := nextval({{seqs}});
            -- Waiters of nodes that stopped renewing: their node's expiry.
            IF {{schema}}.nodes_stale(v_now) THEN
                PERFORM {{schema}}.reap(p_name, v_now, true);
            END IF;
            SELECT count(*)::int INTO v_run FROM {{schema}}.holders h WHERE h.lock = p_name;
            -- The live and the dead waiters (see queue_counts()).
            SELECT c.r_live, c.r_dead INTO v_wait, v_dead FROM {{schema}}.queue_counts(p_name, v_now) c;
            IF v_wait = 0 AND v_dead = 0 AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
                IF v_run = 0 THEN
                    DELETE FROM {{schema}}.locks l WHERE l.name = p_name;
                END IF;
                RETURN QUERY SELECT 'released'::text, 1, p_name,
                    CASE WHEN p_events THEN {{schema}}.slots_in(p_pats) ELSE 0 END, v_run, 0, p_ref, r.kind, r.token,
                    {{schema}}.micros(v_now), {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), v_seq;
                RETURN;
            END IF;
            -- Waiters: hand the slot over (their dead go first, a bounded
            -- number, as release() does).
            IF v_dead > 0 THEN
                PERFORM {{schema}}.drop_dead(p_name, v_now, 64);
            END IF;
            v_slots := {{schema}}.slots_of(p_name);
            RETURN QUERY SELECT 'released'::text, 1, p_name, CASE WHEN p_events THEN v_slots ELSE 0 END, v_run,
                v_wait, p_ref, r.kind, r.token, {{schema}}.micros(v_now),
                {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), v_seq;
            IF v_wait > 0 AND v_slots IS NOT NULL THEN
                PERFORM {{schema}}.grant_heads(p_name, v_slots, v_run, v_wait, v_now);
            ELSIF v_run = 0 AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name) THEN
                DELETE FROM {{schema}}.locks l WHERE l.name = p_name;
            END IF;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
        SELECT b.*, CASE WHEN b.r_ev = 'released' THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.release(ARRAY[p_name], ARRAY[p_token], p_ref, NULL::bigint, p_events) b;
END
$sleeplock$;

-- Acquire one lock: version 4's acquire_one() with p_node, the caller's
-- node (version 4's, without it, stays for the processes of version 4
-- still running while the schema is upgraded: their waiters keep leases
-- of their own). A caller queued here is its node's; acquire() is reached after
-- reaping, and a caller it queued becomes its node's.
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
    p_back    bigint,
    p_node    bigint)
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
    v_wait  integer;
    v_ticket bigint;
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
            IF NOT p_wait AND NOT r.mine AND r.live >= v_slots AND NOT {{schema}}.nodes_stale(v_now) THEN
                -- Refused on this read, with the oldest unexpired holder
                -- (while a node is stale, one of them may be a grant that
                -- ended with its node: acquire() decides, after reaping).
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
    IF p_wait AND v_slots IS NOT NULL THEN
        -- A caller that will wait, and the lock is held or queued: queue it
        -- on a few reads under the lock's row (no upsert of the row, no
        -- general function), by acquire()'s rule: not when its ref holds
        -- the lock (re-entry), nor when fewer live waiters queue than
        -- slots are free of unexpired holders (a grant, maybe a takeover);
        -- those are acquire()'s. Dead waiters are left to the releases and
        -- the sweep.
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_name FOR UPDATE;
        IF FOUND AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
            v_now := clock_timestamp();
            SELECT count(*)::int AS n, (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > v_now))::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_name;
            v_wait := {{schema}}.waiting_of(p_name, v_now);
            IF NOT f.mine AND v_wait >= v_slots - f.live THEN
                -- Its liveness is its node's (see nodes above), whose row
                -- its heartbeat keeps fresh.
                IF NOT EXISTS (SELECT 1 FROM {{schema}}.nodes n WHERE n.id = p_node
                                  AND n.expires >= v_now + (p_wttl * 3 / 10) * interval '1 microsecond') THEN
                    PERFORM {{schema}}.node_up(p_node, p_wttl, v_now);
                END IF;
                v_ticket := nextval({{tickets}});
                INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires, wttl,
                                               node)
                VALUES (v_ticket, p_op, p_ref, p_kind, ARRAY[p_name], p_ttl, p_hold, p_counted, v_now,
                        {{schema}}.owned(), p_wttl, p_node);
                INSERT INTO {{schema}}.queue (lock, ticket, own) VALUES (p_name, v_ticket, true);
                PERFORM {{schema}}.soft();
                RETURN QUERY SELECT 'queued'::text, 1, p_name, v_slots, f.n, v_wait + 1, p_ref, p_kind, 0::bigint,
                    {{schema}}.micros(v_now), 0::bigint, 0::bigint, false, v_ticket, 0::bigint, 0::bigint,
                    nextval({{seqs}});
                RETURN;
            END IF;
        END IF;
    END IF;
    -- acquire() reads waiters' liveness from their rows: those of nodes
    -- that stopped renewing get their node's first.
    PERFORM {{schema}}.reap_locked(ARRAY[p_name]);
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, 0::bigint,
                                  p_wttl, 0::bigint) a;
    IF p_wait AND {{schema}}.own(p_op, p_node, p_wttl) THEN
        -- Queued: see soft() in 004.
        PERFORM {{schema}}.soft();
    END IF;
END
$sleeplock$;

-- A waiter's check, and (p_ticket 0) the first call of an acquisition of
-- several locks or with StaleAfter: version 4's check_one() with p_node
-- (version 4's signature stays for the processes of version 4 still
-- running while the schema is upgraded, as a call of this one without a
-- node, below), reaping the
-- queues before acquire() judges them; a caller queued again becomes its
-- node's. A waiter of one lock full of unexpired holders is answered
-- 'waiting' without acquire(), whose counts read the whole queue.
CREATE OR REPLACE FUNCTION {{schema}}.check_one(
    p_names   text[],
    p_ref     text,
    p_kind    text,
    p_ttl     bigint,
    p_hold    bigint,
    p_counted boolean,
    p_wait    boolean,
    p_op      bigint,
    p_ticket  bigint,
    p_wttl    bigint,
    p_stale   bigint,
    p_node    bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint,
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
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
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_names[1] FOR UPDATE;
        SELECT h.handed INTO g FROM {{schema}}.holders h
         WHERE h.lock = p_names[1] AND h.ref = p_ref AND h.op = p_op;
        IF g IS NOT NULL AND g[1] = p_op AND g[2] = p_ticket THEN
            RETURN QUERY SELECT 'granted'::text, 1, p_names[1], g[7]::int, g[8]::int, g[9]::int, p_ref, p_kind, g[3],
                g[4], g[5], g[10], false, p_ticket, p_ttl, p_hold, g[6];
            RETURN;
        END IF;
        v_now := clock_timestamp();
        IF p_stale = 0 AND NOT {{schema}}.nodes_stale(v_now) THEN
            -- Still waiting, on the holder rows alone: a waiter its node
            -- keeps, of a lock whose slots are all held by unexpired
            -- holders other than its ref, waits whatever the queue holds.
            -- acquire() would answer the same after counting the queue;
            -- this is what a head's periodic check costs. (While a node is
            -- stale a holder may be a grant that ended with its node:
            -- acquire() decides, after reaping.)
            SELECT (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > v_now))::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine,
                   min(h.expires) FILTER (WHERE h.expires > v_now) AS next
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_names[1];
            v_slots := {{schema}}.slots_of(p_names[1]);
            IF NOT f.mine AND f.live >= v_slots
               AND EXISTS (SELECT 1 FROM {{schema}}.waiters w
                            WHERE w.ticket = p_ticket AND w.op = p_op AND w.node = p_node
                              AND w.expires = {{schema}}.owned()) THEN
                RETURN QUERY SELECT 'waiting'::text, 1, p_names[1], v_slots, 0, 0, ''::text, ''::text, 0::bigint,
                    {{schema}}.micros(v_now), {{schema}}.micros(f.next), 0::bigint, false, p_ticket, 0::bigint,
                    0::bigint, 0::bigint;
                RETURN;
            END IF;
        END IF;
    END IF;
    IF p_ticket > 0 AND cardinality(p_names) > 1 THEN
        -- The rows first, in acquire()'s order: a check that finds its
        -- waiter gone deletes its queue rows, whose trigger updates the
        -- locks' rows (see locks.queued).
        PERFORM {{schema}}.lock_existing(p_names);
    END IF;
    PERFORM {{schema}}.reap_locked(p_names);
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_ticket, p_wttl,
                                  p_stale) a;
    IF {{schema}}.own(p_op, p_node, p_wttl)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = ANY (p_names) AND h.op = p_op) THEN
        -- Still waiting (or queued again): nothing but soft state changed.
        PERFORM {{schema}}.soft();
    END IF;
END
$sleeplock$;
-- Version 4's check_one(), for its processes still running while the
-- schema is upgraded: version 5's without a node (their waiters keep
-- leases of their own), so it takes the rows and reaps as version 5 does.
CREATE OR REPLACE FUNCTION {{schema}}.check_one(
    p_names   text[],
    p_ref     text,
    p_kind    text,
    p_ttl     bigint,
    p_hold    bigint,
    p_counted boolean,
    p_wait    boolean,
    p_op      bigint,
    p_ticket  bigint,
    p_wttl    bigint,
    p_stale   bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint,
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    RETURN QUERY SELECT * FROM {{schema}}.check_one(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op,
                                                     p_ticket, p_wttl, p_stale, 0::bigint);
END
$sleeplock$;
