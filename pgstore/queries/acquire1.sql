/* sleeplock acquire1 */
-- Acquire one lock: the fast path of TryAcquire and Acquire, one plain
-- statement (no PL/pgSQL). On one snapshot it reads the definition (the
-- name, else its most specific family), the lock's holders and whether
-- anyone queues for it, and refuses a try (p_wait false) when the lock is
-- full of unexpired holders and nobody queues, on that read alone: nothing
-- written, no row lock waited for. Everything else goes to acquire() in the
-- last branch, which runs only when the first returned no row: still one
-- round trip. Grants are left to acquire() because it takes the lock's row
-- first: a grant decided on this statement's snapshot could take its
-- fencing token before a grant of the same lock that commits, is released
-- and is seen by a resource before this one inserts, and tokens must grow
-- with every grant of a lock. The comment on the first line names the
-- statement in pg_stat_activity.
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 counted, $7 wait,
-- $8 op, $9 waiter ttl µs, $10 the patterns of the name (the name, then its
-- families, most specific first).
WITH x AS (
    SELECT n.t, d.slots, h.nrows, h.live, h.oref, h.okind, h.oexp,
           d.slots IS NOT NULL AND NOT h.mine
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = $1::text) AS ok
      FROM (SELECT clock_timestamp() AS t) n,
           (SELECT (array_agg(d.slots ORDER BY array_position($10::text::text[], d.name)))[1] AS slots
              FROM {{schema}}.defs d WHERE d.name = ANY ($10::text::text[])) d,
           LATERAL (
            SELECT count(*)::int AS nrows,
                   (count(*) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))::int AS live,
                   coalesce(bool_or(h.ref = $2::text), false) AS mine,
                   (array_agg(h.ref ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS oref,
                   (array_agg(h.kind ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS okind,
                   (array_agg(h.expires ORDER BY h.token) FILTER (WHERE h.expires IS NULL OR h.expires > n.t))[1] AS oexp
              FROM {{schema}}.holders h
             WHERE h.lock = $1::text) h
), r AS (
    -- refused on this read, with the oldest unexpired holder
    SELECT 'refused'::text AS ev, 1 AS idx, $1::text AS lock, x.slots, x.nrows AS running, 0 AS waiting,
           x.oref AS ref, x.okind AS kind, 0::bigint AS token, {{schema}}.micros(x.t) AS at,
           {{schema}}.micros(x.oexp) AS expires, 0::bigint AS dur, false AS queued, 0::bigint AS ticket,
           0::bigint AS ttl, 0::bigint AS hold
      FROM x
     WHERE x.ok AND NOT $7::boolean AND x.live >= x.slots
)
SELECT * FROM r
UNION ALL
SELECT a.* FROM {{schema}}.acquire(ARRAY[$1::text], $2::text, $3::text, $4::bigint, $5::bigint, $6::boolean,
                                   $7::boolean, $8::bigint, 0::bigint, $9::bigint) a
 WHERE NOT EXISTS (SELECT 1 FROM r)
