-- sleeplock schema, version 1.
--
-- {{schema}} is replaced by the quoted schema name, {{tokens}} and
-- {{tickets}} by the sequences as regclass literals, and {{unlogged}} by
-- UNLOGGED or nothing. Every statement is idempotent.

CREATE TABLE IF NOT EXISTS {{schema}}.defs (
    name    text        PRIMARY KEY,
    slots   integer     NOT NULL CHECK (slots > 0),
    family  boolean     NOT NULL,
    created timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Fencing tokens and queue tickets: never reused, never cycled. Sequences
-- are always WAL-logged, also in UNLOGGED mode, so tokens only grow.
CREATE SEQUENCE IF NOT EXISTS {{schema}}.tokens AS bigint NO CYCLE;
CREATE SEQUENCE IF NOT EXISTS {{schema}}.tickets AS bigint NO CYCLE;

-- One row per lock that a slow-path operation works on (queueing, takeover,
-- re-entrancy, several locks): those operations lock it, so they are
-- serialised per lock. Removed when the lock is idle.
CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.locks (
    name text PRIMARY KEY
);

-- One row per (lock, holder).
CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.holders (
    lock     text        NOT NULL,
    ref      text        NOT NULL,
    kind     text        NOT NULL DEFAULT '',
    token    bigint      NOT NULL,
    slot     integer     NOT NULL,   -- 1..slots, unique per lock
    count    integer     NOT NULL DEFAULT 1,
    acquired timestamptz NOT NULL,
    renewed  timestamptz NOT NULL,
    expires  timestamptz,            -- NULL: never
    ttl      bigint      NOT NULL,   -- microseconds, 0: never expires
    hold     bigint      NOT NULL,   -- microseconds, 0: the TTL
    op       bigint,                 -- the acquisition that made (or last counted) it
    PRIMARY KEY (lock, ref),
    UNIQUE (lock, slot)
);

-- Callers waiting in the queue, in ticket order. A waiter row has a short
-- lease of its own (expires), renewed while its caller polls, so the
-- waiters of a dead node leave the queue. The request is kept whole, so a
-- releaser could grant it on the waiter's behalf.
CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.waiters (
    ticket  bigint      PRIMARY KEY,
    op      bigint      NOT NULL,
    ref     text        NOT NULL,
    kind    text        NOT NULL DEFAULT '',
    locks   text[]      NOT NULL,    -- in the caller's order
    ttl     bigint      NOT NULL,
    hold    bigint      NOT NULL,
    counted boolean     NOT NULL,
    since   timestamptz NOT NULL,
    expires timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS waiters_op ON {{schema}}.waiters (op);

-- One row per (lock, waiter).
CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.queue (
    lock   text   NOT NULL,
    ticket bigint NOT NULL,
    PRIMARY KEY (lock, ticket)
);

-- Acquisitions given up by their callers (context ended, connection lost):
-- a statement of theirs still running must not grant.
CREATE {{unlogged}} TABLE IF NOT EXISTS {{schema}}.cancelled (
    op bigint      PRIMARY KEY,
    at timestamptz NOT NULL
);

-- The functions below are PL/pgSQL, which keeps the plans of its
-- statements for the session (a SQL function that cannot be inlined is
-- planned at every call), and their statements take scalar parameters, so
-- that generic plans serve them.

-- The names that could define name, most specific first: the name itself,
-- then its families ("a/b/c" → "a/b/c", "a/b/*", "a/*").
CREATE OR REPLACE FUNCTION {{schema}}.patterns(n text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $sleeplock$
DECLARE
    out text[] := ARRAY[n];
    p   integer;
BEGIN
    FOR p IN REVERSE length(n) - 1 .. 2 LOOP
        IF substr(n, p, 1) = '/' THEN
            out := out || (left(n, p - 1) || '/*');
        END IF;
    END LOOP;
    RETURN out;
END
$sleeplock$;

-- The slots of a lock name (exact definition, else the most specific
-- family), NULL when nothing defines it.
CREATE OR REPLACE FUNCTION {{schema}}.slots_of(n text) RETURNS integer
LANGUAGE plpgsql STABLE AS $sleeplock$
DECLARE
    pat text;
    v   integer;
BEGIN
    FOREACH pat IN ARRAY {{schema}}.patterns(n) LOOP
        SELECT d.slots INTO v FROM {{schema}}.defs d WHERE d.name = pat;
        IF FOUND THEN
            RETURN v;
        END IF;
    END LOOP;
    RETURN NULL;
END
$sleeplock$;

-- Microseconds since the epoch, 0 for NULL. STABLE, as extract() from a
-- timestamptz is, so that the planner inlines it (an IMMUTABLE SQL function
-- calling a STABLE one is run as a function call, ~25µs here, each time).
CREATE OR REPLACE FUNCTION {{schema}}.micros(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $sleeplock$
    SELECT coalesce((extract(epoch FROM t) * 1000000)::bigint, 0)
$sleeplock$;

-- Holder rows of a lock (expired ones included).
CREATE OR REPLACE FUNCTION {{schema}}.running_of(n text) RETURNS integer
LANGUAGE plpgsql STABLE AS $sleeplock$
DECLARE
    v integer;
BEGIN
    SELECT count(*) INTO v FROM {{schema}}.holders h WHERE h.lock = n;
    RETURN v;
END
$sleeplock$;

-- Live waiters of a lock.
CREATE OR REPLACE FUNCTION {{schema}}.waiting_of(n text, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql STABLE AS $sleeplock$
DECLARE
    v integer;
BEGIN
    SELECT count(*) INTO v FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
     WHERE q.lock = n AND w.expires > p_now;
    RETURN v;
END
$sleeplock$;

-- Running and waiting of each lock of names.
CREATE OR REPLACE FUNCTION {{schema}}.counts(p_names text[], p_now timestamptz)
RETURNS TABLE (r_lock text, r_running integer, r_waiting integer)
LANGUAGE plpgsql STABLE AS $sleeplock$
DECLARE
    n text;
BEGIN
    FOREACH n IN ARRAY p_names LOOP
        r_lock := n;
        r_running := {{schema}}.running_of(n);
        r_waiting := {{schema}}.waiting_of(n, p_now);
        RETURN NEXT;
    END LOOP;
END
$sleeplock$;

-- Lock the rows of names in canonical order, creating missing ones
-- (lock_rows), or only those that exist (lock_existing).
CREATE OR REPLACE FUNCTION {{schema}}.lock_rows(p_names text[]) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    IF cardinality(p_names) > 1 THEN
        p_names := ARRAY(SELECT DISTINCT u FROM unnest(p_names) u ORDER BY u);
    END IF;
    FOREACH v_name IN ARRAY p_names LOOP
        LOOP
            PERFORM 1 FROM {{schema}}.locks l WHERE l.name = v_name FOR UPDATE;
            EXIT WHEN FOUND;
            INSERT INTO {{schema}}.locks (name) VALUES (v_name) ON CONFLICT DO NOTHING;
        END LOOP;
    END LOOP;
END
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.lock_existing(p_names text[]) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    IF cardinality(p_names) > 1 THEN
        p_names := ARRAY(SELECT DISTINCT u FROM unnest(p_names) u ORDER BY u);
    END IF;
    FOREACH v_name IN ARRAY p_names LOOP
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = v_name FOR UPDATE;
    END LOOP;
END
$sleeplock$;

-- Forget the row of a lock if it is idle (its row is locked).
CREATE OR REPLACE FUNCTION {{schema}}.forget(p_names text[]) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    FOREACH v_name IN ARRAY p_names LOOP
        DELETE FROM {{schema}}.locks l
         WHERE l.name = v_name
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = v_name)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = v_name);
    END LOOP;
END
$sleeplock$;

-- Define a lock or a family. r_created reports whether it was created;
-- r_slots is the definition's slots (the existing one when not created).
CREATE OR REPLACE FUNCTION {{schema}}.define(p_name text, p_slots integer, p_family boolean)
RETURNS TABLE (r_created boolean, r_slots integer, r_running integer, r_waiting integer, r_at bigint, r_old integer)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_old integer;
BEGIN
    LOOP
        INSERT INTO {{schema}}.defs (name, slots, family) VALUES (p_name, p_slots, p_family)
            ON CONFLICT DO NOTHING;
        IF FOUND THEN
            v_now := clock_timestamp();
            -- the slots the name had as a family member, if it was one in use
            SELECT d.slots INTO v_old FROM {{schema}}.defs d
             WHERE NOT p_family AND d.name = ANY (({{schema}}.patterns(p_name))[2:])
               AND (EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = p_name)
                    OR EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name))
             ORDER BY array_position({{schema}}.patterns(p_name), d.name) LIMIT 1;
            RETURN QUERY SELECT true, p_slots, c.r_running, c.r_waiting, {{schema}}.micros(v_now), v_old
                FROM {{schema}}.counts(ARRAY[p_name], v_now) c;
            RETURN;
        END IF;
        RETURN QUERY SELECT false, d.slots, 0, 0, 0::bigint, NULL::integer FROM {{schema}}.defs d WHERE d.name = p_name;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END
$sleeplock$;

-- Change the slots of a definition. No row when nothing has that name.
CREATE OR REPLACE FUNCTION {{schema}}.resize(p_name text, p_slots integer)
RETURNS TABLE (r_old integer, r_family boolean, r_running integer, r_waiting integer, r_at bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_old integer;
    v_family boolean;
    v_now timestamptz;
BEGIN
    SELECT d.slots, d.family INTO v_old, v_family FROM {{schema}}.defs d WHERE d.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.defs d SET slots = p_slots WHERE d.name = p_name AND d.slots <> p_slots;
    v_now := clock_timestamp();
    IF v_family THEN
        RETURN QUERY SELECT v_old, true, 0, 0, {{schema}}.micros(v_now);
    ELSE
        RETURN QUERY SELECT v_old, false, c.r_running, c.r_waiting, {{schema}}.micros(v_now)
            FROM {{schema}}.counts(ARRAY[p_name], v_now) c;
    END IF;
END
$sleeplock$;

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
-- needs their slots, as in the memory store.
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
    p_wttl    bigint)
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
                   (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > v_now))::int,
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
                              WHERE h.lock = p_names[i] AND h.expires <= v_now
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
            r_ev := 'waiting'; r_idx := v_bad; r_lock := p_names[v_bad]; r_ticket := p_ticket;
            RETURN NEXT;
            RETURN;
        END IF;

        IF NOT p_wait THEN
            -- Refused: the first refused lock in the caller's order and its
            -- oldest unexpired holder (none when only the queue refused).
            IF a_live[v_bad] >= a_slots[v_bad] THEN
                SELECT x.ref, x.kind, x.token, x.expires INTO r FROM {{schema}}.holders x
                 WHERE x.lock = p_names[v_bad] AND (x.expires IS NULL OR x.expires > v_now)
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
            DELETE FROM {{schema}}.queue q USING {{schema}}.waiters w
             WHERE q.lock = p_names[i] AND w.ticket = q.ticket AND w.expires <= v_now;
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
        IF r_ev = 'released' AND r_running = 0 AND NOT v_queue THEN
            DELETE FROM {{schema}}.locks l WHERE l.name = v_name;
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
    DELETE FROM {{schema}}.cancelled c WHERE c.at < v_now - interval '1 hour';
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
    PERFORM {{schema}}.forget(p_names);
END
$sleeplock$;

-- Renew the holds of p_ref on every lock of p_names (tokens where not 0),
-- all or none. r_ok false: not all held, nothing changed.
CREATE OR REPLACE FUNCTION {{schema}}.keep(p_names text[], p_tokens bigint[], p_ref text, p_ttl bigint, p_hold bigint)
RETURNS TABLE (r_ok boolean, r_now bigint, r_expires bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    n       integer := cardinality(p_names);
    v_now   timestamptz;
    v_lease bigint := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;
    v_exp   timestamptz;
    v_name  text;
    v_tok   bigint;
    i       integer;
BEGIN
    FOR i IN 1 .. n LOOP
        v_name := p_names[i];
        v_tok := p_tokens[i];
        PERFORM 1 FROM {{schema}}.holders h
          WHERE h.lock = v_name AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok)
            FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT false, {{schema}}.micros(clock_timestamp()), 0::bigint;
            RETURN;
        END IF;
    END LOOP;
    v_now := clock_timestamp();
    v_exp := CASE WHEN p_ttl > 0 THEN v_now + v_lease * interval '1 microsecond' END;
    FOR i IN 1 .. n LOOP
        v_name := p_names[i];
        UPDATE {{schema}}.holders h
           SET ttl = p_ttl, hold = p_hold, expires = v_exp,
               renewed = CASE WHEN p_ttl > 0 THEN v_now - (p_ttl - v_lease) * interval '1 microsecond'
                              ELSE h.acquired END
         WHERE h.lock = v_name AND h.ref = p_ref;
    END LOOP;
    RETURN QUERY SELECT true, {{schema}}.micros(v_now), {{schema}}.micros(v_exp);
END
$sleeplock$;

-- Whether p_ref holds every lock of p_names (tokens where not 0), with the
-- clock, the first lock's renewal and the earliest expiry.
CREATE OR REPLACE FUNCTION {{schema}}.held(p_names text[], p_tokens bigint[], p_ref text)
RETURNS TABLE (r_held boolean, r_now bigint, r_renewed bigint, r_expires bigint)
LANGUAGE plpgsql STABLE AS $sleeplock$
#variable_conflict use_column
DECLARE
    n       integer := cardinality(p_names);
    v_name  text;
    v_tok   bigint;
    v_ren   timestamptz;
    v_exp   timestamptz;
    v_first timestamptz;
    v_min   timestamptz;
    i       integer;
BEGIN
    FOR i IN 1 .. n LOOP
        v_name := p_names[i];
        v_tok := p_tokens[i];
        SELECT h.renewed, h.expires INTO v_ren, v_exp FROM {{schema}}.holders h
         WHERE h.lock = v_name AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok);
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

-- The state of the lock p_name, or (p_name NULL) of every defined lock and
-- family and every family member in use. Holders and queue as JSON when
-- p_detail. No row for a name nothing defines.
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
               WHERE p_name IS NULL AND w.expires > v_now
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
                 WHERE q.lock = v_name AND w.expires > v_now;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$sleeplock$;

-- The single-lock fast paths of TryAcquire/Acquire and Release are plain
-- statements (queries/acquire1.sql, queries/release1.sql) that call
-- acquire() and release() above only in the rare cases.
