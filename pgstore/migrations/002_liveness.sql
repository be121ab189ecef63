-- sleeplock schema, version 2: liveness and the store contract of issue 7.
--
-- Version 1 stays as it was released; this file changes it in place on
-- upgrade (Migrate runs it after 001). Placeholders as in 001, and
-- {{channel}}: the schema's NOTIFY channel as a string literal.
--
-- What changes:
--   - seqs: the sequence of Event.Seq. It is drawn while the statement
--     holds the lock's row (every change of a lock does), so the numbers of
--     one lock's events grow in the store's order, across all nodes.
--   - acquire() takes p_stale: a holder not renewed for p_stale
--     microseconds is taken over whatever its expiry (StaleAfter).
--   - acquire(), release() and undo() NOTIFY {{channel}} with
--     "<free slots>:<lock>" when a lock with waiters may have a slot for
--     one: a slot freed, a waiter gone. Each node's listener wakes that
--     many of its own waiters, in ticket order.
--   - Waiters whose short lease ran out (their node died or paused) are
--     deleted by the operations that meet them and by sweep(), a bounded
--     amount per statement; so are old tombstones and idle lock rows.
--   - release() reports notfound, changing nothing, for a name that no
--     definition covers.

CREATE SEQUENCE IF NOT EXISTS {{schema}}.seqs AS bigint NO CYCLE;

-- The heartbeat rewrites every waiter's expires a few times a second: with
-- room on the page and no index on expires, each is a HOT update (no index
-- entry, little WAL).
ALTER TABLE {{schema}}.waiters SET (fillfactor = 50);
CREATE INDEX IF NOT EXISTS queue_ticket ON {{schema}}.queue (ticket);

-- Tell the listeners that lock p_name may have p_free slots for its
-- waiters. Delivered when the transaction commits.
CREATE OR REPLACE FUNCTION {{schema}}.wake(p_name text, p_free integer) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    PERFORM pg_notify({{channel}}, greatest(p_free, 1)::text || ':' || p_name);
END
$sleeplock$;

-- Delete at most p_limit waiters of lock p_name whose lease ran out (their
-- node died or paused longer than the waiter TTL), with their queue rows,
-- and wake the listeners when one went. Returns how many went.
CREATE OR REPLACE FUNCTION {{schema}}.drop_dead(p_name text, p_now timestamptz, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_n integer;
BEGIN
    WITH dead AS (
        SELECT q.ticket FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
         WHERE q.lock = p_name AND w.expires <= p_now
         LIMIT p_limit
    ), dq AS (
        DELETE FROM {{schema}}.queue q USING dead d WHERE q.ticket = d.ticket
    )
    DELETE FROM {{schema}}.waiters w USING dead d WHERE w.ticket = d.ticket;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n > 0 THEN
        PERFORM {{schema}}.wake(p_name, 1);
    END IF;
    RETURN v_n;
END
$sleeplock$;

-- Sweep, a bounded amount (p_limit rows of each kind) per call: waiters
-- whose lease ran out, with their queue rows; tombstones of cancelled
-- acquisitions older than an hour (no statement runs that long); rows of
-- locks with no holder and no waiter that no one has locked. The locks
-- whose dead waiters went are woken. Returns the rows deleted.
CREATE OR REPLACE FUNCTION {{schema}}.sweep(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_n   integer := 0;
    v_k   integer;
    v_l   text;
BEGIN
    FOR v_l IN
        SELECT DISTINCT q.lock FROM {{schema}}.waiters w JOIN {{schema}}.queue q ON q.ticket = w.ticket
         WHERE w.expires <= v_now LIMIT p_limit
    LOOP
        -- the lock's row first, as every other writer of its queue
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = v_l FOR UPDATE SKIP LOCKED;
        IF FOUND OR NOT EXISTS (SELECT 1 FROM {{schema}}.locks l WHERE l.name = v_l) THEN
            v_n := v_n + {{schema}}.drop_dead(v_l, v_now, p_limit);
        END IF;
    END LOOP;
    -- waiter rows with no queue row left (their statement died half way)
    DELETE FROM {{schema}}.waiters w
     WHERE w.ticket IN (SELECT x.ticket FROM {{schema}}.waiters x
                         WHERE x.expires <= v_now
                           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.ticket = x.ticket)
                         LIMIT p_limit);
    GET DIAGNOSTICS v_k = ROW_COUNT;
    v_n := v_n + v_k;
    DELETE FROM {{schema}}.cancelled c
     WHERE c.op IN (SELECT x.op FROM {{schema}}.cancelled x WHERE x.at < v_now - interval '1 hour' LIMIT p_limit);
    GET DIAGNOSTICS v_k = ROW_COUNT;
    v_n := v_n + v_k;
    -- Idle lock rows: lock some (skipping those in use), then delete those
    -- that a fresh read still finds idle (a grant may have committed
    -- between this statement's snapshot and the lock).
    v_k := 0;
    FOR v_l IN
        SELECT x.name FROM {{schema}}.locks x
         WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = x.name)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = x.name)
         LIMIT p_limit FOR UPDATE SKIP LOCKED
    LOOP
        DELETE FROM {{schema}}.locks l
         WHERE l.name = v_l
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = v_l)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = v_l);
        IF FOUND THEN
            v_k := v_k + 1;
        END IF;
    END LOOP;
    RETURN v_n + v_k;
END
$sleeplock$;

-- Renew the waiter leases of the acquisitions p_ops (one node's waiters)
-- that have not run out, when less than 60 % of the lease is left (the
-- store calls this every quarter of it, so each row is rewritten every
-- other call); returns the ops renewed. A waiter whose lease ran out stays
-- out: its caller queues again at the back.
CREATE OR REPLACE FUNCTION {{schema}}.heartbeat(p_ops bigint[], p_wttl bigint) RETURNS SETOF bigint
LANGUAGE sql AS $sleeplock$
    UPDATE {{schema}}.waiters w SET expires = clock_timestamp() + p_wttl * interval '1 microsecond'
     WHERE w.op = ANY (p_ops) AND w.expires > clock_timestamp()
       AND w.expires < clock_timestamp() + (p_wttl * 6 / 10) * interval '1 microsecond'
    RETURNING w.op
$sleeplock$;

-- Whether lock p_name has a holder other than p_ref or a queue, read
-- afresh (VOLATILE: each statement in it takes a new snapshot). The plain
-- release deletes the lock's row only when this says no once it holds the
-- row: on the statement's snapshot alone it could miss a grant that
-- committed while it waited for the row, and leave a holder without a lock
-- row. Every holder and waiter has its lock's row, which serialises the
-- lock's grants (tokens grow) and the order of its events (Seq); so a plain
-- grant, which creates the row, knows nothing else holds or queues.
CREATE OR REPLACE FUNCTION {{schema}}.fresh_busy(p_name text, p_ref text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $sleeplock$
BEGIN
    RETURN EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name AND h.ref <> p_ref)
        OR EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name);
END
$sleeplock$;

DROP FUNCTION IF EXISTS {{schema}}.acquire(text[], text, text, bigint, bigint, boolean, boolean, bigint, bigint, bigint);

-- Acquire one slot of each lock of p_names (caller's order), all or nothing.
--
-- p_ticket 0: a new request. It is granted when, for every lock, the ref
-- holds it already or fewer live waiters are queued than slots are free
-- (slots minus unexpired holders). Otherwise it is refused (p_wait false)
-- or queued (p_wait true). A refusal is decided on a plain read: it writes
-- nothing and waits for no row lock. A grant locks the lock rows in
-- canonical order and decides again.
--
-- p_ticket > 0: a poll of the queued waiter with that ticket: it is granted
-- when, for every lock, the ref holds it or fewer live waiters are ahead of
-- it than slots are free; else its waiter lease is renewed when due.
--
-- Expired leases are taken over (deleted, all of the lock's) when a grant
-- needs their slots, as in the memory store. With p_stale > 0 a lease is
-- taken over once not renewed for p_stale microseconds (renewed dated back
-- by TTL-hold), whatever its expiry (StaleAfter, the seed's "busy_since <
-- now - ttl"); a lease that never expires is never stale.
--
-- A 'waiting' row carries in r_expires the earliest expiry of the leases
-- that block it (0: none), so its caller knows when to look again.
--
-- Result rows (r_ev): notfound, refused, queued (one per lock), waiting,
-- gone (the waiter row expired), cancelled, expired (a lease taken over),
-- granted / reentered (one per lock, in the caller's order).
CREATE OR REPLACE FUNCTION {{schema}}.acquire(
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
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $sleeplock$
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
BEGIN
    r_idx := 0; r_lock := ''; r_slots := 0; r_running := 0; r_waiting := 0; r_ref := ''; r_kind := '';
    r_token := 0; r_at := 0; r_expires := 0; r_dur := 0; r_queued := false; r_ticket := 0; r_ttl := 0; r_hold := 0;
    -- the lease: expires hold (or ttl) from now, renewed dated back by ttl-hold
    v_lease := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;

    IF p_ticket > 0 THEN
        SELECT w.since, w.expires INTO v_since, v_wexp FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
        v_have := FOUND;
        IF NOT v_have OR v_wexp <= v_now THEN
            -- Granted by an earlier poll whose answer was lost?
            IF NOT v_have AND (SELECT count(*) FROM {{schema}}.holders h
                                WHERE h.lock = ANY (p_names) AND h.ref = p_ref) = n
               AND EXISTS (SELECT 1 FROM {{schema}}.holders h
                            WHERE h.lock = ANY (p_names) AND h.ref = p_ref AND h.op = p_op) THEN
                RETURN QUERY
                    SELECT CASE WHEN h.op = p_op THEN 'granted' ELSE 'reentered' END, u.i::int, u.n,
                           {{schema}}.slots_of(u.n), {{schema}}.running_of(u.n), {{schema}}.waiting_of(u.n, v_now),
                           h.ref, h.kind, h.token, {{schema}}.micros(h.acquired), {{schema}}.micros(h.expires),
                           0::bigint, false, p_ticket, h.ttl, h.hold
                      FROM unnest(p_names) WITH ORDINALITY u(n, i)
                      JOIN {{schema}}.holders h ON h.lock = u.n AND h.ref = p_ref
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
            ELSE
                PERFORM {{schema}}.lock_rows(p_names);
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
        a_rows := '{}'; a_live := '{}'; a_mine := '{}'; a_ahead := '{}'; a_total := '{}';
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
            END IF;
            SELECT count(*)::int,
                   (count(*) FILTER (WHERE h.expires IS NULL OR NOT CASE WHEN p_stale > 0
                        THEN h.renewed <= v_now - p_stale * interval '1 microsecond' ELSE h.expires <= v_now END))::int,
                   coalesce(bool_or(h.ref = p_ref), false),
                   (SELECT count(*)::int FROM {{schema}}.queue q
                     WHERE q.lock = v_name AND q.ticket < v_before
                       AND EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.ticket = q.ticket AND w.expires > v_now))
              INTO v_rows, v_live, v_mine, v_ahead
              FROM {{schema}}.holders h WHERE h.lock = v_name;
            IF p_ticket > 0 THEN
                SELECT count(*)::int INTO v_total FROM {{schema}}.queue q
                 WHERE q.lock = v_name
                   AND EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.ticket = q.ticket AND w.expires > v_now);
            ELSE
                v_total := v_ahead;
            END IF;
            a_rows[i] := v_rows;
            a_live[i] := v_live;
            a_mine[i] := v_mine;
            a_ahead[i] := v_ahead;
            a_total[i] := v_total;
            IF v_bad = 0 AND NOT v_mine AND v_ahead >= a_slots[i] - v_live THEN
                v_bad := i;
            END IF;
        END LOOP;

        IF v_bad = 0 AND v_pass = 2 THEN
            -- Lock the expired leases to take over, of every lock first, so
            -- that a lease being renewed or guarded right now makes us give
            -- up (nothing deleted) instead of waiting for it.
            a_taken := array_fill(0, ARRAY[n]);
            FOR i IN 1 .. n LOOP
                IF NOT a_mine[i] AND a_slots[i] - a_rows[i] < a_ahead[i] + 1 THEN
                    k := 0;
                    FOR r IN SELECT h.ref, h.kind, h.token, h.acquired FROM {{schema}}.holders h
                              WHERE h.lock = p_names[i] AND h.expires IS NOT NULL
                                AND CASE WHEN p_stale > 0 THEN h.renewed <= v_now - p_stale * interval '1 microsecond'
                                         ELSE h.expires <= v_now END
                              ORDER BY h.token FOR UPDATE SKIP LOCKED LOOP
                        t_idx := t_idx || i;
                        t_ref := t_ref || r.ref;
                        t_kind := t_kind || r.kind;
                        t_token := t_token || r.token;
                        t_acq := t_acq || r.acquired;
                        k := k + 1;
                    END LOOP;
                    a_taken[i] := k;
                    IF a_slots[i] - (a_rows[i] - k) <= a_ahead[i] THEN
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
                a_rows[i] := a_rows[i] - 1;
                r_ev := 'expired'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i]; r_running := a_rows[i];
                r_waiting := a_total[i]; r_ref := t_ref[k]; r_kind := t_kind[k]; r_token := t_token[k];
                r_at := {{schema}}.micros(v_now); r_dur := {{schema}}.micros(v_now) - {{schema}}.micros(t_acq[k]);
                RETURN NEXT;
            END LOOP;
            t_idx := '{}'; t_ref := '{}'; t_kind := '{}'; t_token := '{}'; t_acq := '{}';
            v_exp := CASE WHEN p_ttl > 0 THEN v_now + v_lease * interval '1 microsecond' END;
            v_renew := CASE WHEN p_ttl > 0 THEN v_now - (p_ttl - v_lease) * interval '1 microsecond' ELSE v_now END;
            a_tok := array_fill(0::bigint, ARRAY[n]);
            FOR i IN 1 .. n LOOP
                CONTINUE WHEN a_mine[i];
                SELECT s INTO v_slot FROM generate_series(1, a_slots[i]) s
                 WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_names[i] AND h.slot = s)
                 ORDER BY s LIMIT 1;
                v_token := NULL;
                IF v_slot IS NOT NULL THEN
                    INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold, op)
                    VALUES (p_names[i], p_ref, p_kind, nextval({{tokens}}), v_slot, 1, v_now, v_renew, v_exp, p_ttl, p_hold, p_op)
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
                    k := a_slots[i] - a_rows[i] - CASE WHEN a_mine[i] THEN 0 ELSE 1 END;
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
                    RETURNING h.kind, h.token, h.acquired, h.expires, h.ttl, h.hold INTO r;
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
                    r_ttl := r.ttl; r_hold := r.hold;
                    RETURN NEXT;
                ELSE
                    r_ev := 'granted'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i];
                    r_running := a_rows[i] + 1; r_waiting := a_total[i] - CASE WHEN p_ticket > 0 THEN 1 ELSE 0 END;
                    r_ref := p_ref; r_kind := p_kind; r_token := a_tok[i]; r_at := {{schema}}.micros(v_now);
                    r_expires := {{schema}}.micros(v_exp);
                    r_dur := CASE WHEN p_ticket > 0 THEN {{schema}}.micros(v_now) - {{schema}}.micros(v_since) ELSE 0 END;
                    r_ticket := p_ticket; r_ttl := p_ttl; r_hold := p_hold;
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
            SELECT {{schema}}.micros(min(h.expires)) INTO r_expires FROM {{schema}}.holders h
             WHERE h.lock = p_names[v_bad] AND h.expires > v_now;
            r_ev := 'waiting'; r_idx := v_bad; r_lock := p_names[v_bad]; r_ticket := p_ticket;
            r_at := {{schema}}.micros(v_now); r_slots := a_slots[v_bad];
            RETURN NEXT;
            RETURN;
        END IF;

        IF NOT p_wait THEN
            -- Refused: the first refused lock in the caller's order and its
            -- oldest unexpired holder (none when only the queue refused).
            IF a_live[v_bad] >= a_slots[v_bad] THEN
                SELECT x.ref, x.kind, x.token, x.expires INTO r FROM {{schema}}.holders x
                 WHERE x.lock = p_names[v_bad] AND (x.expires IS NULL OR NOT CASE WHEN p_stale > 0
                        THEN x.renewed <= v_now - p_stale * interval '1 microsecond' ELSE x.expires <= v_now END)
                 ORDER BY x.token LIMIT 1;
                r_ref := coalesce(r.ref, ''); r_kind := coalesce(r.kind, ''); r_token := coalesce(r.token, 0);
                r_expires := {{schema}}.micros(r.expires); r_queued := r.ref IS NULL;
            ELSE
                r_ref := ''; r_kind := ''; r_token := 0; r_expires := 0; r_queued := true;
            END IF;
            r_ev := 'refused'; r_idx := v_bad; r_lock := p_names[v_bad]; r_slots := a_slots[v_bad];
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
            INSERT INTO {{schema}}.queue (lock, ticket) VALUES (p_names[i], v_ticket);
            r_ev := 'queued'; r_idx := i; r_lock := p_names[i]; r_slots := a_slots[i]; r_running := a_rows[i];
            r_waiting := a_total[i] + 1; r_ref := p_ref; r_kind := p_kind; r_at := {{schema}}.micros(v_now);
            r_ticket := v_ticket;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END LOOP;
END
$sleeplock$;


-- Release (p_stale NULL) or release-if-stale (p_stale >= 0: microseconds,
-- 0 meaning "past its expiry") the locks of p_names that p_ref holds (with
-- the token, where not 0). A counted hold is decremented. Result rows:
-- released / decremented / notheld, one per lock in the caller's order; no
-- row at all when a stale release found the first lock not stale.
CREATE OR REPLACE FUNCTION {{schema}}.release(p_names text[], p_tokens bigint[], p_ref text, p_stale bigint,
                                               p_events boolean)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $sleeplock$
#variable_conflict use_column
DECLARE
    n       integer := cardinality(p_names);
    v_now   timestamptz;
    v_name  text;
    v_tok   bigint;
    v_queue boolean;
    i       integer;
    r       record;
BEGIN
    -- A name no definition covers: notfound, nothing changed.
    FOR i IN 1 .. n LOOP
        IF {{schema}}.slots_of(p_names[i]) IS NULL THEN
            r_ev := 'notfound'; r_idx := i; r_lock := p_names[i]; r_slots := 0; r_running := 0; r_waiting := 0;
            r_ref := p_ref; r_kind := ''; r_token := 0; r_at := 0; r_dur := 0;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    IF n = 1 THEN
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = p_names[1] FOR UPDATE;
    ELSE
        PERFORM {{schema}}.lock_existing(p_names);
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
    r_ref := p_ref;
    r_at := {{schema}}.micros(v_now);
    FOR i IN 1 .. n LOOP
        v_name := p_names[i];
        v_tok := p_tokens[i];
        DELETE FROM {{schema}}.holders h
         WHERE h.lock = v_name AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok) AND h.count <= 1
        RETURNING h.kind, h.token, {{schema}}.micros(v_now) - {{schema}}.micros(h.acquired) AS d INTO r;
        IF FOUND THEN
            r_ev := 'released';
        ELSE
            UPDATE {{schema}}.holders h SET count = h.count - 1
             WHERE h.lock = v_name AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok) AND h.count > 1
            RETURNING h.kind, h.token, 0::bigint AS d INTO r;
            r_ev := CASE WHEN FOUND THEN 'decremented' ELSE 'notheld' END;
        END IF;
        r_idx := i;
        r_lock := v_name;
        r_kind := coalesce(r.kind, '');
        r_token := coalesce(r.token, 0);
        r_dur := coalesce(r.d, 0);
        SELECT count(*)::int, EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = v_name)
          INTO r_running, v_queue
          FROM {{schema}}.holders h WHERE h.lock = v_name;
        IF v_queue THEN
            PERFORM {{schema}}.drop_dead(v_name, v_now, 64);
            v_queue := EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = v_name);
        END IF;
        IF r_ev = 'released' AND r_running = 0 AND NOT v_queue THEN
            DELETE FROM {{schema}}.locks l WHERE l.name = v_name;
        ELSIF r_ev = 'released' AND v_queue THEN
            PERFORM {{schema}}.wake(v_name, {{schema}}.slots_of(v_name) - r_running);
        END IF;
        r_slots := 0;
        r_waiting := 0;
        IF p_events AND r_ev = 'released' THEN
            r_slots := {{schema}}.slots_of(v_name);
            IF v_queue THEN
                r_waiting := {{schema}}.waiting_of(v_name, v_now);
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$sleeplock$;

-- Give up acquisition p_op of p_ref: it grants nothing from now on, its
-- waiter row goes and what it was granted is released (a counted
-- re-entry is taken back). Result rows as release's, for the released.
CREATE OR REPLACE FUNCTION {{schema}}.undo(p_names text[], p_ref text, p_op bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
BEGIN
    PERFORM 1 FROM {{schema}}.locks l WHERE l.name = ANY (p_names) ORDER BY l.name FOR UPDATE;
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
            RETURNING h.lock, h.kind, h.token, {{schema}}.micros(v_now) - {{schema}}.micros(h.acquired) AS d)
        SELECT 'released', array_position(p_names, g.lock), g.lock, 0, 0, 0, p_ref, g.kind, g.token,
               {{schema}}.micros(v_now), g.d
          FROM gone g;
    -- What this acquisition held or where it queued may be free now.
    PERFORM {{schema}}.wake(u, 1) FROM unnest(p_names) u
      WHERE EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = u);
    PERFORM {{schema}}.forget(p_names);
END
$sleeplock$;
