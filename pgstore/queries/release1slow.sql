/* sleeplock release1slow */
-- Release one lock in every case: release_one() (migrations 003 to 008),
-- which also hands the freed slot to the head waiter. The store runs it
-- when release1.sql released nothing, or first when the lock was last
-- seen slow.
--
-- $1 name, $2 token (0: any), $3 ref, $4 whether the event is wanted (its
-- slots), $5 the patterns of the name, $6 the store's node: a grant for a
-- waiter of that node comes back as a row 'handed' (its notification's
-- payload in r_ref), for the store to hand over, instead of a notification.
SELECT * FROM {{schema}}.release_one($1::text, $2::bigint, $3::text, $4::boolean, $5::text::text[], $6::bigint)
