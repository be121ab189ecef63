/* sleeplock acquire1 */
-- Acquire one lock: TryAcquire and the first step of Acquire, without
-- StaleAfter. One call of acquire_one() (migrations 003 to 005), which grants a
-- free lock or refuses a full one on a few index lookups and hands every
-- other case to acquire(). The comment on the first line names the
-- statement in pg_stat_activity.
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 counted, $7 wait,
-- $8 op, $9 waiter ttl µs, $10 the patterns of the name (the name, then its
-- families, most specific first), $11 lease µs (hold or ttl), $12 ttl - lease µs,
-- $13 the store's node (migration 005: a waiter's lease is its node's).
SELECT * FROM {{schema}}.acquire_one($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::boolean, $7::boolean,
                                     $8::bigint, $9::bigint, $10::text::text[], $11::bigint, $12::bigint,
                                     $13::bigint)
