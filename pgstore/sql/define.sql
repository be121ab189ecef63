CREATE OR REPLACE FUNCTION {{schema}}.define(p_name text, p_slots integer, p_family boolean)
 RETURNS TABLE(r_created boolean, r_slots integer, r_running integer, r_waiting integer, r_at bigint, r_old integer)
 LANGUAGE plpgsql
AS $sleeplock$
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

CREATE OR REPLACE FUNCTION {{schema}}.define_def(p_name text, p_slots integer, p_family boolean)
 RETURNS TABLE(r_created boolean, r_slots integer, r_running integer, r_waiting integer, r_at bigint, r_old integer)
 LANGUAGE plpgsql
AS $sleeplock$
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
               AND (EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = p_name)
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

CREATE OR REPLACE FUNCTION {{schema}}.defs_key()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
AS $sleeplock$
    SELECT hashtextextended('sleeplock definitions ' || {{channel}}, 0)
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.resize(p_name text, p_slots integer)
 RETURNS TABLE(r_old integer, r_family boolean, r_running integer, r_waiting integer, r_at bigint)
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    RETURN QUERY SELECT * FROM {{schema}}.resize_def(p_name, p_slots);
    PERFORM {{schema}}.respill();
END
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.resize_def(p_name text, p_slots integer)
 RETURNS TABLE(r_old integer, r_family boolean, r_running integer, r_waiting integer, r_at bigint)
 LANGUAGE plpgsql
AS $sleeplock$
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

CREATE OR REPLACE FUNCTION {{schema}}.respill()
 RETURNS void
 LANGUAGE plpgsql
AS $sleeplock$
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
