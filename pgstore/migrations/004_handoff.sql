-- sleeplock schema, version 4: the release hands the slot over itself.
--
-- Versions 1 to 3 stay as they were released. Placeholders as in 002.
--
-- Why: up to version 3 a release that left a lock with waiters only sent
-- NOTIFY; each node then woke its head waiter, which ran a check (the
-- general acquire(), which takes the lock's row) to be granted. A handoff
-- cost a notification, a wake-up and one or more checks racing for the
-- row, and with many clients cycling through one lock those checks and
-- the new waiters' queueing kept the row busy while the slot sat free.
--
-- What changes:
--   - holders.handed: set on a grant made by a release on the waiter's
--     behalf, {op, ticket, token, at µs, expires µs, Seq, slots, running,
--     waiting, waited µs}: the event of the grant, which the waiter's node
--     reads from the notification (or, if it missed it, from this row).
--     NULL for every other grant. Adding a nullable column rewrites
--     nothing.
--   - grant_heads(): under the lock's row, grants the lock's free slots to
--     the live waiters at the head of its queue in ticket order, each
--     whole (its token and Seq drawn under the row), deletes their waiter
--     and queue rows and NOTIFYs "g <handed>" for each. It stops at a
--     waiter it may not grant alone: one waiting for several locks (all or
--     nothing: it needs its other locks' rows, which this statement may not
--     take out of order) or one whose ref holds the lock already
--     (re-entry); that waiter is woken to check for itself, as before.
--   - release_one(): when the ref's hold was the lock's only one and it
--     goes, but other holders or waiters remain, it no longer defers to
--     release(): it deletes the hold, draws the release's Seq, then calls
--     grant_heads(). The release event's Seq is below the grants'.
--   - check_one(): a waiter's check. It takes the lock's row of a waiter
--     of one lock first (so it never runs while a release hands the slot
--     over); when a release granted the waiter (its holder row carries its
--     op and ticket in handed), it answers 'granted' with that grant's
--     event; else it is acquire() as before, with the event's Seq.
--   - Queueing and a waiter's checks that leave it waiting commit
--     asynchronously (soft()): a waiter's place is soft state, and the
--     lock's row, which a queueing statement holds until it commits, is
--     then free for the release that hands the lock over without waiting
--     for a WAL flush. A crash of the server may lose a place in the queue
--     taken just before it (the waiter finds its row gone and queues again
--     at the back, as after a pause); never a grant or a release, which
--     commit as configured. acquire_one() is version 3's but for that.

ALTER TABLE {{schema}}.holders ADD COLUMN IF NOT EXISTS handed bigint[];

-- waiters.wttl: the length of the waiter's lease as its node last renewed
-- it (NULL until then: expires - since). A release hands a slot only to a
-- waiter with at least 30 % of that lease left: a live node renews its
-- waiters when less than 60 % is left, every quarter of it, so they never
-- fall below ~35 %, while the waiters of a node that died or paused do
-- within 0.7 of a lease of their last renewal. A waiter that is not fresh
-- is woken to check for itself instead (version 3's way), so a dead
-- node's waiter is handed a slot (which its TTL would then hold) only in
-- the first moments after its death, and a live but late one keeps its
-- place.
ALTER TABLE {{schema}}.waiters ADD COLUMN IF NOT EXISTS wttl bigint;

-- Renew waiter leases (version 2's heartbeat()), recording their length.
CREATE OR REPLACE FUNCTION {{schema}}.heartbeat(p_ops bigint[], p_wttl bigint) RETURNS SETOF bigint
LANGUAGE sql AS $sleeplock$
    UPDATE {{schema}}.waiters w SET expires = clock_timestamp() + p_wttl * interval '1 microsecond', wttl = p_wttl
     WHERE w.op = ANY (p_ops) AND w.expires > clock_timestamp()
       AND w.expires < clock_timestamp() + (p_wttl * 6 / 10) * interval '1 microsecond'
    RETURNING w.op
$sleeplock$;

-- Make the calling transaction commit without waiting for its WAL to be
-- flushed (and for synchronous replicas): for statements that change only
-- soft state, a place in the queue or a waiter's lease, whose loss in a
-- crash costs the waiter its place and nothing else.
CREATE OR REPLACE FUNCTION {{schema}}.soft() RETURNS void
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
END
$sleeplock$;

-- Acquire one lock: version 3's acquire_one() (see there), but a caller
-- that waits on a held or queued lock is queued here on a few reads under
-- the lock's row, not by acquire(), and a statement that only queued the
-- caller commits as soft().
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
                v_ticket := nextval({{tickets}});
                INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires)
                VALUES (v_ticket, p_op, p_ref, p_kind, ARRAY[p_name], p_ttl, p_hold, p_counted, v_now,
                        v_now + p_wttl * interval '1 microsecond');
                INSERT INTO {{schema}}.queue (lock, ticket) VALUES (p_name, v_ticket);
                PERFORM {{schema}}.soft();
                RETURN QUERY SELECT 'queued'::text, 1, p_name, v_slots, f.n, v_wait + 1, p_ref, p_kind, 0::bigint,
                    {{schema}}.micros(v_now), 0::bigint, 0::bigint, false, v_ticket, 0::bigint, 0::bigint,
                    nextval({{seqs}});
                RETURN;
            END IF;
        END IF;
    END IF;
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(ARRAY[p_name], p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, 0::bigint,
                                  p_wttl, 0::bigint) a;
    IF p_wait AND EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.op = p_op) THEN
        -- Queued: see soft() above.
        PERFORM {{schema}}.soft();
    END IF;
END
$sleeplock$;

-- Grant the free slots of lock p_name to the head of its queue (see
-- above). The caller holds the lock's row. A waiter whose node died less
-- than its waiter lease ago still counts as live: its grant is then held
-- until its lease TTL runs out and is taken over like any dead holder's. p_slots: the lock's slots;
-- p_run: its holder rows; p_wait: its live waiters. Returns how many were
-- granted.
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
    FOR w IN SELECT x.ticket, x.op, x.ref, x.kind, x.locks, x.ttl, x.hold, x.since,
                    {{schema}}.micros(x.expires) - {{schema}}.micros(p_now)
                      > coalesce(x.wttl, {{schema}}.micros(x.expires) - {{schema}}.micros(x.since)) * 3 / 10 AS fresh
               FROM {{schema}}.queue q JOIN {{schema}}.waiters x ON x.ticket = q.ticket
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
                                       handed)
        VALUES (p_name, w.ref, w.kind, v_tok, v_slot, 1, p_now, v_renew, v_exp, w.ttl, w.hold, w.op, g);
        DELETE FROM {{schema}}.queue q WHERE q.ticket = w.ticket;
        DELETE FROM {{schema}}.waiters x WHERE x.ticket = w.ticket;
        PERFORM pg_notify({{channel}}, 'g ' || array_to_string(g, ' '));
        v_n := v_n + 1;
        v_free := v_free - 1;
    END LOOP;
    RETURN v_n;
END
$sleeplock$;

-- Release one lock (version 3's, see there), now also when other holders
-- or waiters remain: the hold goes, and the free slot is handed to the head
-- of the queue by grant_heads(). A counted hold, not held, or a name
-- nothing defines are release()'s, as before.
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
            SELECT count(*)::int INTO v_run FROM {{schema}}.holders h WHERE h.lock = p_name;
            -- The live and the dead waiters, on one scan of the queue.
            SELECT (count(*) FILTER (WHERE w.expires > v_now))::int, (count(*) FILTER (WHERE w.expires <= v_now))::int
              INTO v_wait, v_dead
              FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket WHERE q.lock = p_name;
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

-- A waiter's check (acquire() with p_ticket > 0), with the event's Seq. A
-- waiter of one lock that a release granted (its waiter row is gone and
-- its holder row is marked with its ticket) is answered with that grant,
-- as the release recorded it; everything else is acquire()'s.
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
#variable_conflict use_column
DECLARE
    g bigint[];
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
    END IF;
    RETURN QUERY
        SELECT a.*, CASE WHEN a.r_ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
          FROM {{schema}}.acquire(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_ticket, p_wttl,
                                  p_stale) a;
    IF EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.op = p_op)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = ANY (p_names) AND h.op = p_op) THEN
        -- Still waiting (or queued again): nothing but soft state changed.
        PERFORM {{schema}}.soft();
    END IF;
END
$sleeplock$;
