/* sleeplock acquire1slow */
-- Acquire one lock, without StaleAfter, in every case: acquire_slow()
-- (migrations 006 to 009). The store runs it when acquire1.sql granted nothing, or
-- first when the lock was last seen slow (held, queued, or several
-- slots held).
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 counted, $7 wait,
-- $8 op, $9 waiter ttl µs, $10 the patterns of the name, $11 lease µs (hold
-- or ttl), $12 ttl - lease µs, $13 the store's node (migration 005: a
-- waiter's lease is its node's), then true: the store reads holds in the
-- slot arrays of migration 009, so a free slot of a multi-slot lock may be
-- granted there. The last column says whether the lock's row is fast after
-- a grant.
SELECT * FROM {{schema}}.acquire_one($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::boolean, $7::boolean,
                                      $8::bigint, $9::bigint, $10::text::text[], $11::bigint, $12::bigint,
                                      $13::bigint)
