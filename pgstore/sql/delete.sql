-- Deletion: delete_def(), Delete's one statement. Functions of sql/ are
-- applied at every Migrate with CREATE OR REPLACE; each is defined once,
-- in one of these files. A signature is a contract (docs/schema.md):
-- change one by adding a new name.

-- delete_def: deletes the definition p_name (a lock, or a family "x/*")
-- with its locks' rows, holders and places in the queue (a family's
-- members, in use or idle, too), under the definitions' advisory lock
-- (defs_key(), as define() and resize() take it). Rows (r_ev):
--   notfound  p_name has no definition of its own; nothing changed.
--   inuse     a lock is held or has live waiters and p_force is false:
--             r_lock is the first such lock by name, r_holders and
--             r_waiters count them over every lock; nothing changed. The
--             first check is a plain read (no write, no row lock); a
--             lock that looked free is checked again under its row.
--   released  a hold ended (p_force), one row per hold, told to its
--             holder's node (lost()).
--   deleted   a lock deleted: each member in use of a family, then
--             p_name itself, whose row carries the holds and waiters
--             ended.
-- The waiters ended lose their rows; woken (wake()), their next check
-- finds no definition (ErrNotFound). Tokens come from next_token(), whose
-- sequence no Delete touches: a lock defined again grants tokens above
-- its old ones. Counters go with the rows (the definition's row, into
-- which the locks' rows fold, is deleted last).
CREATE OR REPLACE FUNCTION {{schema}}.delete_def(p_name text, p_force boolean)
RETURNS TABLE(r_ev text, r_lock text, r_slots integer, r_holders integer, r_waiters integer, r_ref text,
    r_kind text, r_token bigint, r_weight integer, r_at bigint, r_dur bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_slots   integer;
    v_family  boolean;
    v_prefix  text;
    v_names   text[];
    v_now     timestamptz;
    v_holders integer;
    v_waiters integer;
    v_first   text;
    v_pass    integer;
    v_others  text[];
BEGIN
    r_lock := p_name; r_slots := 0; r_holders := 0; r_waiters := 0; r_ref := ''; r_kind := ''; r_token := 0;
    r_weight := 1; r_at := 0; r_dur := 0;
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    SELECT d.slots, d.family INTO v_slots, v_family FROM {{schema}}.defs d WHERE d.name = p_name;
    IF NOT FOUND THEN
        r_ev := 'notfound';
        RETURN NEXT;
        RETURN;
    END IF;
    v_prefix := left(p_name, -1);
    FOR v_pass IN 1 .. 2 LOOP
        v_now := clock_timestamp();
        IF v_family THEN
            -- the members in use that the family defines (not a more
            -- specific family, nor a lock defined by its own name)
            v_names := ARRAY(
                SELECT DISTINCT u.lock FROM (SELECT h.lock FROM {{schema}}.holding h WHERE starts_with(h.lock, v_prefix)
                                              UNION SELECT q.lock FROM {{schema}}.queue q WHERE starts_with(q.lock, v_prefix)) u
                 WHERE {{schema}}.def_of(u.lock) = p_name ORDER BY u.lock);
        ELSE
            v_names := ARRAY[p_name];
        END IF;
        SELECT count(*)::int INTO v_holders FROM {{schema}}.holding h WHERE h.lock = ANY (v_names);
        SELECT coalesce(sum(({{schema}}.waiter_counts(u, v_now)).r_live), 0)::int INTO v_waiters FROM unnest(v_names) u;
        IF v_holders + v_waiters > 0 AND NOT p_force THEN
            SELECT u INTO v_first FROM unnest(v_names) u
             WHERE EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = u)
                OR ({{schema}}.waiter_counts(u, v_now)).r_live > 0
             ORDER BY u LIMIT 1;
            r_ev := 'inuse'; r_lock := coalesce(v_first, p_name); r_holders := v_holders; r_waiters := v_waiters;
            RETURN NEXT;
            RETURN;
        END IF;
        EXIT WHEN v_pass = 2;
        -- Under the rows (sorted, spilled to holder rows), as every other
        -- writer of their holders and queues, a family's idle members'
        -- too (a grant in one would be deleted with it, unsaid); then
        -- counted again. No row is made meanwhile (make_row() waits for
        -- the advisory lock).
        IF v_family THEN
            v_names := v_names || ARRAY(SELECT l.name FROM {{schema}}.locks l
                                         WHERE starts_with(l.name, v_prefix) AND {{schema}}.def_of(l.name) = p_name);
        END IF;
        PERFORM {{schema}}.lock_rows(v_names, false);
    END LOOP;
    v_now := clock_timestamp();

    -- The waiters go from every queue they are in; those of other locks
    -- are woken, as their queues may move on.
    v_others := ARRAY(
        SELECT DISTINCT q.lock FROM {{schema}}.queue q
         WHERE q.ticket IN (SELECT x.ticket FROM {{schema}}.queue x WHERE x.lock = ANY (v_names))
           AND NOT q.lock = ANY (v_names));
    DELETE FROM {{schema}}.waiters w
     WHERE w.ticket IN (SELECT x.ticket FROM {{schema}}.queue x WHERE x.lock = ANY (v_names));
    DELETE FROM {{schema}}.queue q
     WHERE q.ticket IN (SELECT x.ticket FROM {{schema}}.queue x WHERE x.lock = ANY (v_names));
    PERFORM {{schema}}.wake(u, 1) FROM unnest(v_others) u;

    RETURN QUERY
        WITH gone AS (
            DELETE FROM {{schema}}.holders h WHERE h.lock = ANY (v_names)
            RETURNING h.lock, h.ref, h.kind, h.token, h.weight,
                      {{schema}}.micros(v_now) - {{schema}}.micros(h.acquired) AS d)
        SELECT 'released'::text, g.lock, {{schema}}.slots_in({{schema}}.patterns(g.lock)), 0, 0, g.ref, g.kind, g.token, g.weight,
               {{schema}}.micros(v_now), g.d
          FROM gone g CROSS JOIN LATERAL {{schema}}.lost(g.lock, g.ref, g.token, 'd') t ORDER BY g.lock, g.token;
    IF v_family THEN
        DELETE FROM {{schema}}.locks l WHERE starts_with(l.name, v_prefix) AND {{schema}}.def_of(l.name) = p_name;
        RETURN QUERY SELECT 'deleted'::text, u, v_slots, 0, 0, ''::text, ''::text, 0::bigint, 1,
                            {{schema}}.micros(v_now), 0::bigint
                       FROM unnest(v_names) u;
    ELSE
        DELETE FROM {{schema}}.locks l WHERE l.name = p_name;
    END IF;
    DELETE FROM {{schema}}.defs d WHERE d.name = p_name;
    RETURN QUERY SELECT 'deleted'::text, p_name, v_slots, v_holders, v_waiters, ''::text, ''::text, 0::bigint, 1,
                        {{schema}}.micros(v_now), 0::bigint;
    -- Their waiters, woken, find no definition.
    PERFORM {{schema}}.wake(u, 1) FROM unnest(v_names) u;
END
$sleeplock$;
