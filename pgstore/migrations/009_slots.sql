-- sleeplock schema, version 9: every slot of a multi-slot lock lives in
-- the lock's row.
--
-- Versions 1 to 8 stay as they were. Placeholders as in 002.
--
-- Why: version 6 keeps a lock's first holder in the lock's row, so a grant
-- and a release of a free 1-slot lock are one HOT UPDATE each. A second
-- holder of a multi-slot lock spilled the row (holder rows, two unique
-- index entries each, PL/pgSQL for every later grant and release) until
-- the lock was empty again: a lock of N slots shared by N callers never
-- took the short path after its first grant.
--
-- What changes:
--   - The slot arrays: locks.xref, xkind, xtoken, xacquired, xrenewed,
--     xexpires, xttl, xhold, xop, one element per slot (element i is slot
--     i; xref NULL: free). A fast row is either in scalar mode (xref NULL,
--     its one holder in ref, kind, … as in version 6) or in slot mode
--     (xref of the lock's slots, ref = '', which no ref equals and which
--     is not NULL: the statements of versions 6 to 8 still running during
--     the upgrade neither grant nor release in such a row, they take the
--     slow path, which spills it).
--   - queries/acquireN.sql grants the first free slot of a row in slot
--     mode, and queries/releaseN.sql frees the caller's: one UPDATE each,
--     of the arrays only (no indexed column: HOT). The store sends them for
--     locks it last saw fast with several slots.
--   - acquire_slow() gains p_many: a caller of version 9 lets it make a
--     free fast row of a multi-slot lock (or a new one) a row in slot mode,
--     and grant a free slot of such a row in place (a racing grant took the
--     slot the hot statement aimed at), under the row. It answers whether
--     the row is fast after its grant (r_fast). Version 8's acquire_slow()
--     (the 13 arguments, which processes of versions 6 to 8 call) never
--     grants a slot in the arrays: their held.sql would not see it.
--   - release_one() (p_node) releases a slot in the arrays in place, and
--     answers a row 'fast' when the lock's row stays fast; every other
--     case is version 8's, renamed release_handing().
--   - spill() moves the slots of the arrays to holder rows (slot i to
--     slot i), so every rule of versions 1 to 8 runs unchanged after it.
--   - Readers see the slots through the view holding; keep_one(), keep(),
--     spill_held() and queries/held.sql find a hold in the arrays too;
--     sweep() deletes a row in slot mode once it has been free a minute.
--   - resize() and define() spill the rows in slot mode whose arrays no
--     longer have the lock's slots (resize_def() and define_def() are
--     version 1's and 6's, renamed): the arrays are always the slots.

ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xref text[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xkind text[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xtoken bigint[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xacquired timestamptz[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xrenewed timestamptz[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xexpires timestamptz[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xttl bigint[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xhold bigint[];
ALTER TABLE {{schema}}.locks ADD COLUMN IF NOT EXISTS xop bigint[];

-- Every holder: the holder rows, the holders in lock rows in scalar mode,
-- and the slots of lock rows in slot mode.
CREATE OR REPLACE VIEW {{schema}}.holding AS
    SELECT h.lock, h.ref, h.kind, h.token, h.slot, h.count, h.acquired, h.renewed, h.expires, h.ttl, h.hold, h.op
      FROM {{schema}}.holders h
    UNION ALL
    SELECT l.name, l.ref, l.kind, l.token, 1, 1, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op
      FROM {{schema}}.locks l
     WHERE l.fast AND l.ref IS NOT NULL AND l.xref IS NULL
    UNION ALL
    SELECT l.name, s.ref, s.kind, s.token, s.slot::integer, 1, s.acquired, s.renewed, s.expires, s.ttl, s.hold, s.op
      FROM {{schema}}.locks l
     CROSS JOIN LATERAL unnest(l.xref, l.xkind, l.xtoken, l.xacquired, l.xrenewed, l.xexpires, l.xttl, l.xhold, l.xop)
           WITH ORDINALITY AS s(ref, kind, token, acquired, renewed, expires, ttl, hold, op, slot)
     WHERE l.fast AND l.xref IS NOT NULL AND s.ref IS NOT NULL;

-- Take the row of lock p_name and make the lock slow: its holder (scalar
-- mode) or its slots (slot mode) become holder rows. False when the lock
-- has no row.
CREATE OR REPLACE FUNCTION {{schema}}.spill(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    r record;
BEGIN
    SELECT l.fast, l.ref, l.kind, l.token, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op, l.xref IS NOT NULL AS slots
      INTO r
      FROM {{schema}}.locks l WHERE l.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF r.fast THEN
        IF r.slots THEN
            INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold,
                                           op)
            SELECT p_name, s.ref, s.kind, s.token, s.slot, 1, s.acquired, s.renewed, s.expires, s.ttl, s.hold, s.op
              FROM {{schema}}.locks l
             CROSS JOIN LATERAL unnest(l.xref, l.xkind, l.xtoken, l.xacquired, l.xrenewed, l.xexpires, l.xttl, l.xhold,
                                       l.xop)
                   WITH ORDINALITY AS s(ref, kind, token, acquired, renewed, expires, ttl, hold, op, slot)
             WHERE l.name = p_name AND s.ref IS NOT NULL;
        ELSIF r.ref IS NOT NULL THEN
            INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold,
                                           op)
            VALUES (p_name, r.ref, r.kind, r.token, 1, 1, r.acquired, r.renewed, r.expires, r.ttl, r.hold, r.op);
        END IF;
        UPDATE {{schema}}.locks l
           SET fast = false, ref = NULL, xref = NULL, xkind = NULL, xtoken = NULL, xacquired = NULL, xrenewed = NULL,
               xexpires = NULL, xttl = NULL, xhold = NULL, xop = NULL
         WHERE l.name = p_name;
    END IF;
    RETURN true;
END
$sleeplock$;

-- Renew one hold (version 6's keep_one()): in its lock's row in scalar
-- mode, else in its slot, else in its holder row. A spill racing with it
-- has committed by the time an UPDATE of the row is answered (it waits for
-- the row), so the next one finds the holder row.
CREATE OR REPLACE FUNCTION {{schema}}.keep_one(p_name text, p_token bigint, p_ref text, p_ttl bigint, p_hold bigint,
                                                p_lease bigint, p_back bigint)
RETURNS TABLE (r_ok boolean, r_now bigint, r_expires bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_exp timestamptz := CASE WHEN p_ttl > 0 THEN v_now + p_lease * interval '1 microsecond' END;
BEGIN
    UPDATE {{schema}}.locks l
       SET ttl = p_ttl, hold = p_hold, expires = v_exp,
           renewed = CASE WHEN p_ttl > 0 THEN v_now - p_back * interval '1 microsecond' ELSE l.acquired END
     WHERE l.name = p_name AND l.fast AND l.xref IS NULL AND l.ref = p_ref AND (p_token = 0 OR l.token = p_token);
    IF NOT FOUND THEN
        UPDATE {{schema}}.locks l
           SET xttl[p.k] = p_ttl, xhold[p.k] = p_hold, xexpires[p.k] = v_exp,
               xrenewed[p.k] = CASE WHEN p_ttl > 0 THEN v_now - p_back * interval '1 microsecond' ELSE l.xacquired[p.k] END
          FROM (SELECT array_position(x.xref, p_ref) AS k FROM {{schema}}.locks x WHERE x.name = p_name) p
         WHERE l.name = p_name AND l.fast AND l.xref[p.k] = p_ref AND (p_token = 0 OR l.xtoken[p.k] = p_token);
        IF NOT FOUND THEN
            UPDATE {{schema}}.holders h
               SET ttl = p_ttl, hold = p_hold, expires = v_exp,
                   renewed = CASE WHEN p_ttl > 0 THEN v_now - p_back * interval '1 microsecond' ELSE h.acquired END
             WHERE h.lock = p_name AND h.ref = p_ref AND (p_token = 0 OR h.token = p_token);
            IF NOT FOUND THEN
                RETURN;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT true, {{schema}}.micros(v_now), {{schema}}.micros(v_exp);
END
$sleeplock$;

-- Whether lock row l holds (p_ref, p_token) in its row: scalar mode or a
-- slot (p_token 0: any token).
CREATE OR REPLACE FUNCTION {{schema}}.row_holds(l {{schema}}.locks, p_ref text, p_token bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $sleeplock$
    SELECT l.fast AND CASE WHEN l.xref IS NULL
                           THEN l.ref = p_ref AND (p_token = 0 OR l.token = p_token)
                           ELSE coalesce(p_token = 0 OR l.xtoken[array_position(l.xref, p_ref)] = p_token, false)
                                AND array_position(l.xref, p_ref) IS NOT NULL
                      END
$sleeplock$;

-- Guard's first step (version 6's spill_held()), on holds in slots too.
CREATE OR REPLACE FUNCTION {{schema}}.spill_held(p_names text[], p_tokens bigint[], p_ref text) RETURNS bigint
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
    v_n    bigint := 0;
BEGIN
    FOR v_name IN SELECT DISTINCT u.n FROM unnest(p_names, p_tokens) u(n, t)
                    JOIN {{schema}}.locks l ON l.name = u.n AND {{schema}}.row_holds(l, p_ref, u.t)
                   ORDER BY u.n LOOP
        PERFORM {{schema}}.spill(v_name);
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END
$sleeplock$;

-- Renew the holds of several locks (version 7's keep()), finding a hold in
-- a slot too.
CREATE OR REPLACE FUNCTION {{schema}}.keep(p_names text[], p_tokens bigint[], p_ref text, p_ttl bigint, p_hold bigint)
RETURNS TABLE (r_ok boolean, r_now bigint, r_expires bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_lease bigint := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;
    v_tok   bigint;
    k       record;
    v_now   bigint;
    v_exp   bigint;
    i       integer;
BEGIN
    -- Find and lock every hold first, all or none (see version 7).
    FOR i IN 1 .. cardinality(p_names) LOOP
        v_tok := p_tokens[i];
        PERFORM 1 FROM {{schema}}.locks l
          WHERE l.name = p_names[i] AND {{schema}}.row_holds(l, p_ref, v_tok)
            FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            PERFORM 1 FROM {{schema}}.holders h
              WHERE h.lock = p_names[i] AND h.ref = p_ref AND (v_tok = 0 OR h.token = v_tok)
                FOR NO KEY UPDATE;
            IF NOT FOUND THEN
                RETURN QUERY SELECT false, {{schema}}.micros(clock_timestamp()), 0::bigint;
                RETURN;
            END IF;
        END IF;
    END LOOP;
    FOR i IN 1 .. cardinality(p_names) LOOP
        SELECT * INTO k FROM {{schema}}.keep_one(p_names[i], p_tokens[i], p_ref, p_ttl, p_hold, v_lease,
                                                  p_ttl - v_lease);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'sleeplock: keep(): the hold of % locked above is gone', p_names[i];
        END IF;
        v_now := coalesce(v_now, k.r_now);
        IF k.r_expires IS NOT NULL AND (v_exp IS NULL OR k.r_expires < v_exp) THEN
            v_exp := k.r_expires;
        END IF;
    END LOOP;
    RETURN QUERY SELECT true, v_now, v_exp;
END
$sleeplock$;

-- Sweep (version 6's sweep()), deleting a row in slot mode too once it has
-- been free a minute.
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
        PERFORM 1 FROM {{schema}}.locks l WHERE l.name = v_l FOR UPDATE SKIP LOCKED;
        IF FOUND OR NOT EXISTS (SELECT 1 FROM {{schema}}.locks l WHERE l.name = v_l) THEN
            v_n := v_n + {{schema}}.drop_dead(v_l, v_now, p_limit);
        END IF;
    END LOOP;
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
    v_k := 0;
    FOR v_l IN
        SELECT x.name FROM {{schema}}.locks x
         WHERE (x.ref IS NULL OR (x.xref IS NOT NULL AND cardinality(array_remove(x.xref, NULL)) = 0))
           AND (NOT x.fast OR x.freed < v_now - interval '1 minute')
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = x.name)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = x.name)
         LIMIT p_limit FOR UPDATE SKIP LOCKED
    LOOP
        DELETE FROM {{schema}}.locks l
         WHERE l.name = v_l
           AND (l.ref IS NULL OR (l.xref IS NOT NULL AND cardinality(array_remove(l.xref, NULL)) = 0))
           AND (NOT l.fast OR l.freed < v_now - interval '1 minute')
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = v_l)
           AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = v_l);
        IF FOUND THEN
            v_k := v_k + 1;
        END IF;
    END LOOP;
    RETURN v_n + v_k;
END
$sleeplock$;

-- The times t moved back by p_us µs (the store's Advance, for tests).
CREATE OR REPLACE FUNCTION {{schema}}.shift(t timestamptz[], p_us bigint) RETURNS timestamptz[]
LANGUAGE sql IMMUTABLE AS $sleeplock$
    SELECT array_agg(u.x - p_us * interval '1 microsecond' ORDER BY u.o) FROM unnest(t) WITH ORDINALITY u(x, o)
$sleeplock$;

-- The key of the transaction-level advisory lock that orders the changes
-- of definitions (resize(), define(): exclusive) and the turning of rows
-- to slot mode (acquire_slow(): shared): a row turned to slot mode with a
-- lock's old slots is one that resize() or define() then spills, and one
-- turned after them reads the new slots. A transaction-level lock pins
-- no connection beyond the statement's transaction.
CREATE OR REPLACE FUNCTION {{schema}}.defs_key() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $sleeplock$
    SELECT hashtextextended('sleeplock definitions ' || {{channel}}, 0)
$sleeplock$;

-- Spill the rows in slot mode whose arrays are no longer their lock's
-- slots (after a definition changed), in name order.
CREATE OR REPLACE FUNCTION {{schema}}.respill() RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN SELECT l.name FROM {{schema}}.locks l
                   WHERE l.fast AND l.xref IS NOT NULL
                     AND cardinality(l.xref) IS DISTINCT FROM {{schema}}.slots_of(l.name)
                   ORDER BY l.name LOOP
        PERFORM {{schema}}.spill(v_name);
    END LOOP;
END
$sleeplock$;

ALTER FUNCTION {{schema}}.resize(text, integer) RENAME TO resize_def;

CREATE OR REPLACE FUNCTION {{schema}}.resize(p_name text, p_slots integer)
RETURNS TABLE (r_old integer, r_family boolean, r_running integer, r_waiting integer, r_at bigint)
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    RETURN QUERY SELECT * FROM {{schema}}.resize_def(p_name, p_slots);
    PERFORM {{schema}}.respill();
END
$sleeplock$;

ALTER FUNCTION {{schema}}.define(text, integer, boolean) RENAME TO define_def;

CREATE OR REPLACE FUNCTION {{schema}}.define(p_name text, p_slots integer, p_family boolean)
RETURNS TABLE (r_created boolean, r_slots integer, r_running integer, r_waiting integer, r_at bigint, r_old integer)
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_created boolean := false;
    r         record;
BEGIN
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    FOR r IN SELECT * FROM {{schema}}.define_def(p_name, p_slots, p_family) LOOP
        v_created := v_created OR r.r_created;
        r_created := r.r_created;
        r_slots := r.r_slots;
        r_running := r.r_running;
        r_waiting := r.r_waiting;
        r_at := r.r_at;
        r_old := r.r_old;
        RETURN NEXT;
    END LOOP;
    IF v_created THEN
        PERFORM {{schema}}.respill();
    END IF;
END
$sleeplock$;

-- Acquire one lock for a store of version 9 (p_many): a free slot of a
-- multi-slot lock whose row is fast is granted in the row's slots (a new
-- row, or a free row in scalar mode, becomes a row in slot mode); every
-- other case is version 8's acquire_slow(). r_fast: the lock's row is fast
-- after a grant (the store then sends the hot statements).
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
    p_node    bigint,
    p_many    boolean)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint,
               r_queued boolean, r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint, r_fast boolean)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_slots integer := {{schema}}.slots_in(p_pats);
    v_now   timestamptz;
    v_exp   timestamptz;
    v_tok   bigint;
    v_k     integer;
    v_run   integer;
    v_turn  boolean;
    l       record;
BEGIN
    IF p_many AND v_slots > 1
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
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
                    -- Free, in scalar mode: the caller in slot 1.
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
                       SET xref[v_k] = p_ref, xkind[v_k] = p_kind, xtoken[v_k] = nextval({{tokens}}),
                           xacquired[v_k] = v_now, xrenewed[v_k] = v_now - p_back * interval '1 microsecond',
                           xexpires[v_k] = v_exp, xttl[v_k] = p_ttl, xhold[v_k] = p_hold, xop[v_k] = p_op
                     WHERE x.name = p_name
                    RETURNING x.xtoken[v_k], cardinality(array_remove(x.xref, NULL)) INTO v_tok, v_run;
                    RETURN QUERY SELECT 'granted'::text, 1, p_name, v_slots, v_run, 0, p_ref, p_kind, v_tok,
                        {{schema}}.micros(v_now), {{schema}}.micros(v_exp), 0::bigint, false, 0::bigint, p_ttl, p_hold,
                        nextval({{seqs}}), true;
                    RETURN;
                END IF;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT a.*, a.r_ev = 'granted' AND a.r_running = 1 AND coalesce(v_slots, 1) <= 1
        FROM {{schema}}.acquire_slow(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_wttl, p_pats,
                                     p_lease, p_back, p_node) a;
END
$sleeplock$;

ALTER FUNCTION {{schema}}.release_one(text, bigint, text, boolean, text[], bigint) RENAME TO release_handing;

-- Release one lock for a store of node p_node: a hold in a slot of a row
-- in slot mode is freed in place, and a row 'fast' says the lock's row
-- stays fast; every other case is version 8's release_one() (now
-- release_handing()).
CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
                                                   p_pats text[], p_node bigint)
RETURNS TABLE (r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
               r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint, r_seq bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_k   integer;
    l     record;
    r     record;
BEGIN
    SELECT x.fast, x.xref, x.xtoken INTO l FROM {{schema}}.locks x WHERE x.name = p_name FOR UPDATE;
    IF FOUND AND l.fast AND l.xref IS NOT NULL THEN
        v_k := array_position(l.xref, p_ref);
        IF v_k IS NOT NULL AND (p_token = 0 OR l.xtoken[v_k] = p_token) THEN
            v_now := clock_timestamp();
            UPDATE {{schema}}.locks x SET xref[v_k] = NULL, freed = v_now WHERE x.name = p_name
            RETURNING x.xkind[v_k] AS kind, x.xtoken[v_k] AS token, x.xacquired[v_k] AS acquired,
                      cardinality(array_remove(x.xref, NULL)) AS run
                 INTO r;
            RETURN QUERY SELECT 'released'::text, 1, p_name, CASE WHEN p_events THEN {{schema}}.slots_in(p_pats) ELSE 0 END,
                r.run, 0, p_ref, r.kind, r.token, {{schema}}.micros(v_now),
                {{schema}}.micros(v_now) - {{schema}}.micros(r.acquired), nextval({{seqs}});
            RETURN QUERY SELECT 'fast'::text, 1, p_name, 0, 0, 0, ''::text, ''::text, 0::bigint, 0::bigint, 0::bigint,
                0::bigint;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.release_handing(p_name, p_token, p_ref, p_events, p_pats, p_node);
END
$sleeplock$;
