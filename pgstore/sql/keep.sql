-- Holds: renewal (keep_one(), keep()), Held (held()), and the move of a
-- lock's holders from its fast row to holder rows (spill()).

-- held: whether p_ref holds every lock of p_names (with the tokens, where
-- not 0), wherever the holds are, with now, the earliest renewal and
-- expiry.
CREATE OR REPLACE FUNCTION {{schema}}.held(p_names text[], p_tokens bigint[], p_ref text)
 RETURNS TABLE(r_held boolean, r_now bigint, r_renewed bigint, r_expires bigint)
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_ren   timestamptz;
    v_exp   timestamptz;
    v_first timestamptz;
    v_min   timestamptz;
    i       integer;
BEGIN
    FOR i IN 1 .. cardinality(p_names) LOOP
        SELECT h.renewed, h.expires INTO v_ren, v_exp FROM {{schema}}.holding h
         WHERE h.lock = p_names[i] AND h.ref = p_ref AND (p_tokens[i] = 0 OR h.token = p_tokens[i])
         LIMIT 1;
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

-- keep: renews the holds of several locks, all or none, wherever they are.
CREATE OR REPLACE FUNCTION {{schema}}.keep(p_names text[], p_tokens bigint[], p_ref text, p_ttl bigint, p_hold bigint)
 RETURNS TABLE(r_ok boolean, r_now bigint, r_expires bigint)
 LANGUAGE plpgsql
AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_lease bigint := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;
    v_tok   bigint;
    k       record;
    v_now   bigint;
    v_exp   bigint;
    i       integer;
BEGIN
    -- Find and lock every hold first, all or none.
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

-- keep_one: renews one hold: in its lock's row in scalar mode, else in its
-- slot, else in its holder row. A spill racing with it has committed by
-- the time an UPDATE of the row is answered (it waits for the row), so the
-- next one finds the holder row.
CREATE OR REPLACE FUNCTION {{schema}}.keep_one(p_name text, p_token bigint, p_ref text, p_ttl bigint, p_hold bigint, p_lease bigint, p_back bigint)
 RETURNS TABLE(r_ok boolean, r_now bigint, r_expires bigint)
 LANGUAGE plpgsql
AS $sleeplock$
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
            -- (a renewal also confirms a handed grant: see holders.node)
            UPDATE {{schema}}.holders h
               SET ttl = p_ttl, hold = p_hold, expires = v_exp, node = NULL,
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

-- row_holds: whether lock row l holds (p_ref, p_token) in the row itself,
-- scalar mode or a slot (p_token 0: any token).
CREATE OR REPLACE FUNCTION {{schema}}.row_holds(l {{schema}}.locks, p_ref text, p_token bigint)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $sleeplock$
    SELECT l.fast AND CASE WHEN l.xref IS NULL
                           THEN l.ref = p_ref AND (p_token = 0 OR l.token = p_token)
                           ELSE coalesce(p_token = 0 OR l.xtoken[array_position(l.xref, p_ref)] = p_token, false)
                                AND array_position(l.xref, p_ref) IS NOT NULL
                      END
$sleeplock$;

-- spill: takes the row of lock p_name and makes the lock slow: its holder
-- (scalar mode, with its weight: see locks.wacqs) or its slots (slot mode,
-- slot i to slot i) become holder rows. False when the lock has no row.
CREATE OR REPLACE FUNCTION {{schema}}.spill(p_name text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    r record;
BEGIN
    SELECT l.fast, l.ref, l.kind, l.token, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op, l.xref IS NOT NULL AS slots,
           CASE WHEN l.wacqs = l.acqs THEN l.weight ELSE 1 END AS weight
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
                                           op, weight)
            VALUES (p_name, r.ref, r.kind, r.token, 1, 1, r.acquired, r.renewed, r.expires, r.ttl, r.hold, r.op,
                    r.weight);
        END IF;
        UPDATE {{schema}}.locks l
           SET fast = false, ref = NULL, xref = NULL, xkind = NULL, xtoken = NULL, xacquired = NULL, xrenewed = NULL,
               xexpires = NULL, xttl = NULL, xhold = NULL, xop = NULL
         WHERE l.name = p_name;
    END IF;
    RETURN true;
END
$sleeplock$;

-- spill_held: Guard's first step, in a transaction of its own: the holds
-- of p_ref in their locks' rows become holder rows, which Guard locks.
CREATE OR REPLACE FUNCTION {{schema}}.spill_held(p_names text[], p_tokens bigint[], p_ref text)
 RETURNS bigint
 LANGUAGE plpgsql
AS $sleeplock$
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
