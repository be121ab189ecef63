-- Counters (store.Stats): the columns acqs … hb of locks and defs (see
-- 001_init.sql), bumped where holds begin and end, read by stats().

-- def_of: the definition of lock n (its own, else the most specific
-- family), NULL when nothing defines it.
CREATE OR REPLACE FUNCTION {{schema}}.def_of(n text)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $sleeplock$
    SELECT d.name FROM unnest({{schema}}.patterns(n)) WITH ORDINALITY p(pat, i)
      JOIN {{schema}}.defs d ON d.name = p.pat ORDER BY p.i LIMIT 1
$sleeplock$;

-- timed: whether the hold of token p_token is one of those whose length is
-- recorded (store.Stats.HoldSampling): one in 256, by token, so that the
-- release of an untimed hold writes only the row's release count (see
-- release_fast.sql). IMMUTABLE SQL, inlined in the statements; pgstore's
-- holdSampling is the same 256.
CREATE OR REPLACE FUNCTION {{schema}}.timed(p_token bigint)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
    SELECT p_token & 255 = 0
$sleeplock$;

-- bump: histogram h (wb, hb) with one more in the bucket of us µs: the
-- buckets (1-based) of store.HistogramBounds, 1 ms times powers of 4; 12
-- the rest.
CREATE OR REPLACE FUNCTION {{schema}}.bump(h bigint[], us bigint)
 RETURNS bigint[]
 LANGUAGE plpgsql
 IMMUTABLE
AS $sleeplock$
DECLARE
    b integer := width_bucket(greatest(us, 0),
        '{1001,4001,16001,64001,256001,1024001,4096001,16384001,65536001,262144001,1048576001}'::bigint[]) + 1;
BEGIN
    h[b] := coalesce(h[b], 0) + 1;
    RETURN h;
END
$sleeplock$;

-- tally: counts on lock p_name's row (which the caller holds) what a slow
-- path did: p_acqs grants (p_wait: the wait of one that queued, in µs;
-- NULL: it did not), p_rels releases or p_exps takeovers of an expired
-- hold, p_lost of them by another's hand, p_hold the ended hold's length
-- (µs; NULL: no hold ended), recorded when p_timed: its token is timed(),
-- or the store samples it by time (p_sample of release_one(), release()).
-- One UPDATE of the row, whatever it counts.
CREATE OR REPLACE FUNCTION {{schema}}.tally(p_name text, p_acqs integer, p_wait bigint, p_rels integer,
    p_exps integer, p_lost integer, p_hold bigint, p_timed boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_waited boolean := p_wait IS NOT NULL;
    v_held   boolean := p_hold IS NOT NULL AND p_timed;
BEGIN
    UPDATE {{schema}}.locks l
       SET acqs = l.acqs + p_acqs, rels = l.rels + p_rels, exps = l.exps + p_exps, losses = l.losses + p_lost,
           waited = l.waited + CASE WHEN v_waited THEN 1 ELSE 0 END,
           wait_us = l.wait_us + CASE WHEN v_waited THEN greatest(p_wait, 0) ELSE 0 END,
           wb = CASE WHEN v_waited THEN {{schema}}.bump(l.wb, p_wait) ELSE l.wb END,
           holds = l.holds + CASE WHEN v_held THEN 1 ELSE 0 END,
           hold_us = l.hold_us + CASE WHEN v_held THEN greatest(p_hold, 0) ELSE 0 END,
           hb = CASE WHEN v_held THEN {{schema}}.bump(l.hb, p_hold) ELSE l.hb END
     WHERE l.name = p_name;
END
$sleeplock$;

-- addv: a + b element by element over indexes 1..12 (a missing or NULL
-- element is 0), NULL when both are.
CREATE OR REPLACE FUNCTION {{schema}}.addv(a bigint[], b bigint[])
 RETURNS bigint[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
    SELECT CASE WHEN a IS NULL AND b IS NULL THEN NULL
                ELSE ARRAY(SELECT coalesce(a[g.i], 0) + coalesce(b[g.i], 0) FROM generate_series(1, 12) g(i) ORDER BY g.i) END
$sleeplock$;

-- fold: trigger locks_fold, before a row of locks is deleted (the sweep,
-- undo()): adds its counters to its definition's row, so that
-- they never go down while the definition lives.
CREATE OR REPLACE FUNCTION {{schema}}.fold()
 RETURNS trigger
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    UPDATE {{schema}}.defs d
       SET acqs = d.acqs + OLD.acqs, rels = d.rels + OLD.rels, exps = d.exps + OLD.exps,
           losses = d.losses + OLD.losses, waited = d.waited + OLD.waited, wait_us = d.wait_us + OLD.wait_us,
           wb = {{schema}}.addv(d.wb, OLD.wb), holds = d.holds + OLD.holds, hold_us = d.hold_us + OLD.hold_us,
           hb = {{schema}}.addv(d.hb, OLD.hb)
     WHERE d.name = {{schema}}.def_of(OLD.name);
    RETURN OLD;
END
$sleeplock$;

CREATE OR REPLACE TRIGGER locks_fold BEFORE DELETE ON {{schema}}.locks
    FOR EACH ROW WHEN (OLD.acqs <> 0 OR OLD.rels <> 0 OR OLD.exps <> 0 OR OLD.waited <> 0 OR OLD.holds <> 0)
    EXECUTE FUNCTION {{schema}}.fold();

-- stats: one row per definition, with its counters (its row's, plus those
-- of the rows of its locks) and its gauges at p_now: the holders running
-- and expired and the queued of its locks in use, their number and slots.
-- wb and hb come as text, 12 numbers separated by spaces.
CREATE OR REPLACE FUNCTION {{schema}}.stats(p_now timestamp with time zone)
 RETURNS TABLE(r_name text, r_slots integer, r_family boolean, r_locks integer, r_running integer,
    r_expired integer, r_waiting integer, r_acqs bigint, r_rels bigint, r_exps bigint, r_losses bigint,
    r_waited bigint, r_wait_us bigint, r_wb text, r_holds bigint, r_hold_us bigint, r_hb text)
 LANGUAGE sql
 STABLE
AS $sleeplock$
    WITH used AS (
        SELECT u.lock, sum(u.run)::integer AS run, sum(u.exp)::integer AS exp, sum(u.wait)::integer AS wait
          FROM (SELECT h.lock, coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > p_now), 0) AS run,
                       coalesce(sum(h.weight) FILTER (WHERE h.expires <= p_now), 0) AS exp, 0 AS wait
                  FROM {{schema}}.holding h GROUP BY h.lock
                UNION ALL
                SELECT q.lock, 0, 0, count(*) FROM {{schema}}.queue q GROUP BY q.lock) u
         GROUP BY u.lock
    ), rows AS (
        SELECT coalesce(l.name, u.lock) AS name, u.lock IS NOT NULL AS inuse, coalesce(u.run, 0) AS run,
               coalesce(u.exp, 0) AS exp, coalesce(u.wait, 0) AS wait,
               coalesce(l.acqs, 0) AS acqs, coalesce(l.rels, 0) AS rels, coalesce(l.exps, 0) AS exps,
               coalesce(l.losses, 0) AS losses, coalesce(l.waited, 0) AS waited, coalesce(l.wait_us, 0) AS wait_us,
               l.wb, coalesce(l.holds, 0) AS holds, coalesce(l.hold_us, 0) AS hold_us, l.hb
          FROM (SELECT * FROM {{schema}}.locks x
                 WHERE x.acqs <> 0 OR x.rels <> 0 OR x.exps <> 0 OR x.waited <> 0 OR x.holds <> 0) l
          FULL JOIN used u ON u.lock = l.name
    ), mine AS (
        SELECT {{schema}}.def_of(r.name) AS def, r.* FROM rows r
    ), agg AS (
        SELECT m.def, count(*) FILTER (WHERE m.inuse)::integer AS locks, sum(m.run)::integer AS run,
               sum(m.exp)::integer AS exp, sum(m.wait)::integer AS wait, sum(m.acqs)::bigint AS acqs,
               sum(m.rels)::bigint AS rels, sum(m.exps)::bigint AS exps, sum(m.losses)::bigint AS losses,
               sum(m.waited)::bigint AS waited, sum(m.wait_us)::bigint AS wait_us,
               sum(m.holds)::bigint AS holds, sum(m.hold_us)::bigint AS hold_us
          FROM mine m WHERE m.def IS NOT NULL GROUP BY m.def
    ), vec AS (
        SELECT m.def, b.i, sum(coalesce(m.wb[b.i], 0))::bigint AS w, sum(coalesce(m.hb[b.i], 0))::bigint AS h
          FROM mine m CROSS JOIN generate_series(1, 12) b(i)
         WHERE m.def IS NOT NULL AND (m.wb IS NOT NULL OR m.hb IS NOT NULL)
         GROUP BY m.def, b.i
    )
    SELECT d.name, CASE WHEN d.family THEN d.slots * coalesce(a.locks, 0) ELSE d.slots END, d.family,
           CASE WHEN d.family THEN coalesce(a.locks, 0) ELSE 1 END,
           coalesce(a.run, 0), coalesce(a.exp, 0), coalesce(a.wait, 0),
           d.acqs + coalesce(a.acqs, 0), d.rels + coalesce(a.rels, 0), d.exps + coalesce(a.exps, 0),
           d.losses + coalesce(a.losses, 0), d.waited + coalesce(a.waited, 0), d.wait_us + coalesce(a.wait_us, 0),
           (SELECT string_agg((coalesce(d.wb[g.i], 0) + coalesce(v.w, 0))::text, ' ' ORDER BY g.i)
              FROM generate_series(1, 12) g(i) LEFT JOIN vec v ON v.def = d.name AND v.i = g.i),
           d.holds + coalesce(a.holds, 0), d.hold_us + coalesce(a.hold_us, 0),
           (SELECT string_agg((coalesce(d.hb[g.i], 0) + coalesce(v.h, 0))::text, ' ' ORDER BY g.i)
              FROM generate_series(1, 12) g(i) LEFT JOIN vec v ON v.def = d.name AND v.i = g.i)
      FROM {{schema}}.defs d LEFT JOIN agg a ON a.def = d.name
     ORDER BY d.name
$sleeplock$;
