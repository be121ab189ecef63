/* sleeplock acquire1 */
-- Acquire one lock: the fast path of TryAcquire and Acquire, one plain
-- statement (no PL/pgSQL). On one snapshot it reads the definition (the
-- name, else its most specific family), the lock's holders and whether
-- anyone queues for it, then
--   - grants a free slot when the ref does not hold the lock, nobody queues
--     and a slot is free without taking over an expired lease. It first
--     inserts the lock's row in locks: that key is what serialises every
--     grant of a lock (the slow path locks the same row), and only once it
--     has it does it draw the fencing token, so tokens grow with every grant
--     of the lock. If the row exists (another grant holds the lock, or slow-
--     path work is under way) it grants nothing and acquire() decides.
--   - refuses a try (p_wait false) when the lock is full of unexpired
--     holders and nobody queues, on that read alone: nothing written, no
--     row lock waited for;
--   - else hands the request to acquire() in its last branch, which runs
--     only when the others returned no row: still one round trip.
--   - 'raced' (it took the lock's row, yet the slot was taken since its
--     read): the caller runs the statement again; acquire() cannot run in
--     the same statement as the insert of the row it would lock.
-- Result rows as acquire()'s, and the event's Seq, drawn from seqs while the
-- statement holds the lock's row (0 for rows that are no event). Not used
-- with StaleAfter (acquire() decides those). The comment on the first line
-- names the statement in pg_stat_activity.
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 counted, $7 wait,
-- $8 op, $9 waiter ttl µs, $10 the patterns of the name (the name, then its
-- families, most specific first), $11 lease µs (hold or ttl), $12 ttl - lease µs.
WITH x AS (
    SELECT n.t, d.slots, h.nrows, h.live, h.oref, h.okind, h.oexp,
           -- a free slot without a takeover: 1, or the one above the holders
           -- when they fill 1..nrows; else (holes) acquire() finds one
           CASE WHEN h.nrows = 0 THEN 1
                WHEN h.nrows < d.slots AND NOT (h.nrows + 1 = ANY (h.taken)) THEN h.nrows + 1 END AS slot,
           d.slots IS NOT NULL AND NOT h.mine
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = $1::text) AS ok
      FROM (SELECT clock_timestamp() AS t) n,
           (SELECT (array_agg(d.slots ORDER BY array_position($10::text::text[], d.name)))[1] AS slots
              FROM {{schema}}.defs d WHERE d.name = ANY ($10::text::text[])) d,
           LATERAL (
            SELECT count(*)::int AS nrows,
                   (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))::int AS live,
                   coalesce(bool_or(h.ref = $2::text), false) AS mine,
                   array_agg(h.slot) AS taken,
                   (array_agg(h.ref ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS oref,
                   (array_agg(h.kind ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS okind,
                   (array_agg(h.expires ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS oexp
              FROM {{schema}}.holders h
             WHERE h.lock = $1::text) h
), lk AS (
    INSERT INTO {{schema}}.locks (name)
    SELECT $1::text FROM x WHERE x.ok AND x.slot IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING name
), ins AS (
    INSERT INTO {{schema}}.holders AS h (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold, op)
    SELECT $1::text, $2::text, $3::text, nextval({{tokens}}), x.slot, 1, x.t,
           x.t - $12::bigint * interval '1 microsecond',
           CASE WHEN $4::bigint > 0 THEN x.t + $11::bigint * interval '1 microsecond' END,
           $4::bigint, $5::bigint, $8::bigint
      FROM x, lk
    ON CONFLICT DO NOTHING
    RETURNING h.token, h.expires
), r AS (
    -- granted, raced, or refused on this read (with the oldest unexpired holder)
    SELECT CASE WHEN i.token IS NOT NULL THEN 'granted'
                WHEN EXISTS (SELECT 1 FROM lk) THEN 'raced' ELSE 'refused' END AS ev, 1 AS idx, $1::text AS lock,
           -- a plain grant made the lock's row: nothing else held or queued
           x.slots, CASE WHEN i.token IS NOT NULL THEN 1 ELSE x.nrows END AS running, 0 AS waiting,
           CASE WHEN i.token IS NOT NULL THEN $2::text ELSE x.oref END AS ref,
           CASE WHEN i.token IS NOT NULL THEN $3::text ELSE x.okind END AS kind,
           coalesce(i.token, 0) AS token, {{schema}}.micros(x.t) AS at,
           {{schema}}.micros(CASE WHEN i.token IS NOT NULL THEN i.expires ELSE x.oexp END) AS expires,
           0::bigint AS dur, false AS queued, 0::bigint AS ticket,
           CASE WHEN i.token IS NOT NULL THEN $4::bigint ELSE 0 END AS ttl,
           CASE WHEN i.token IS NOT NULL THEN $5::bigint ELSE 0 END AS hold
      FROM x LEFT JOIN ins i ON true
     WHERE i.token IS NOT NULL OR EXISTS (SELECT 1 FROM lk) OR (x.ok AND NOT $7::boolean AND x.live >= x.slots)
)
SELECT u.*, CASE WHEN u.ev IN ('granted', 'expired', 'queued') THEN nextval({{seqs}}) ELSE 0 END
  FROM (SELECT * FROM r
        UNION ALL
        SELECT a.* FROM {{schema}}.acquire(ARRAY[$1::text], $2::text, $3::text, $4::bigint, $5::bigint, $6::boolean,
                                           $7::boolean, $8::bigint, 0::bigint, $9::bigint, 0::bigint) a
         WHERE NOT EXISTS (SELECT 1 FROM r)) u
