-- State, the counts of a lock and the sweep of idle rows.

-- running_of: the slots the holders of lock n take, wherever they are.
CREATE OR REPLACE FUNCTION {{schema}}.running_of(n text)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
DECLARE
    v integer;
BEGIN
    SELECT coalesce(sum(h.weight), 0) INTO v FROM {{schema}}.holding h WHERE h.lock = n;
    RETURN v;
END
$sleeplock$;

-- states: the state of lock p_name, or of every lock and definition (NULL):
-- the slots its live holders take (r_running), those of the holders past
-- their expiry that nobody took over (r_expired), its holders (r_leases),
-- its live waiters, and with p_detail the holders and the queue as JSON.
CREATE OR REPLACE FUNCTION {{schema}}.states(p_name text, p_detail boolean)
 RETURNS TABLE(r_name text, r_slots integer, r_family boolean, r_running integer, r_expired integer, r_waiting integer, r_now bigint, r_holders text, r_queue text, r_leases integer)
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
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
        UNION SELECT h.lock FROM {{schema}}.holding h WHERE p_name IS NULL
        UNION SELECT q.lock FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
               WHERE p_name IS NULL AND {{schema}}.waiter_live(w.expires, w.node, v_now)
    LOOP
        SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_name AND d.family;
        v_family := FOUND;
        IF NOT v_family THEN
            v_slots := {{schema}}.slots_in({{schema}}.patterns(v_name));
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
            r_expired := 0;
            r_waiting := 0;
            r_leases := 0;
        ELSE
            SELECT coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int,
                   coalesce(sum(h.weight) FILTER (WHERE h.expires <= v_now), 0)::int, count(*)::int
              INTO r_running, r_expired, r_leases
              FROM {{schema}}.holding h WHERE h.lock = v_name;
            r_waiting := ({{schema}}.waiter_counts(v_name, v_now)).r_live;
            IF p_detail THEN
                SELECT json_agg(json_build_object(
                        'ref', h.ref, 'kind', h.kind, 'token', h.token, 'count', h.count, 'weight', h.weight,
                        'acquired', {{schema}}.micros(h.acquired), 'renewed', {{schema}}.micros(h.renewed),
                        'expires', {{schema}}.micros(h.expires), 'hold', h.hold)
                        ORDER BY h.token)::text
                  INTO r_holders
                  FROM {{schema}}.holding h WHERE h.lock = v_name;
                SELECT json_agg(json_build_object(
                        'ref', w.ref, 'kind', w.kind, 'since', {{schema}}.micros(w.since), 'locks', w.locks,
                        'weight', q.weight)
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

-- sweep: deletes up to p_limit idle rows (a slow lock's at once, a fast
-- free row or row in slot mode once free for a minute), dead waiters, and
-- tombstones older than an hour.
CREATE OR REPLACE FUNCTION {{schema}}.sweep(p_limit integer)
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
