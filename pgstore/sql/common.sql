CREATE OR REPLACE FUNCTION {{schema}}.micros(t timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $sleeplock$
    SELECT coalesce((extract(epoch FROM t) * 1000000)::bigint, 0)
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.patterns(n text)
 RETURNS text[]
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
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

CREATE OR REPLACE FUNCTION {{schema}}.slots_in(p_pats text[])
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
DECLARE
    v_pat   text;
    v_slots integer;
BEGIN
    FOREACH v_pat IN ARRAY p_pats LOOP
        SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_pat;
        IF FOUND THEN
            RETURN v_slots;
        END IF;
    END LOOP;
    RETURN NULL;
END
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.slots_of(n text)
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
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
