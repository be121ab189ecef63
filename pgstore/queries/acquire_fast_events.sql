/* sleeplock acquire_fast_events */
-- acquire_fast.sql that also reads the slots of the lock's definition and
-- draws the event's Seq once the row is ours.
-- $1 … $8 as acquire_fast.sql, $9 the patterns of the name (the name, then
-- its families, most specific first). Returns the token, acquired and
-- expires (µs), the slots and the Seq.
UPDATE {{schema}}.locks l
   SET ref = $2::text, kind = $3::text, token = nextval({{tokens}}), acquired = statement_timestamp(),
       renewed = statement_timestamp() - $8::bigint * interval '1 microsecond',
       expires = CASE WHEN $4::bigint > 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END,
       ttl = $4::bigint, hold = $5::bigint, op = $6::bigint, acqs = l.acqs + 1
 WHERE l.name = $1::text AND l.fast AND l.ref IS NULL
RETURNING l.token, {{schema}}.micros(l.acquired), {{schema}}.micros(l.expires),
          {{schema}}.slots_in($9::text::text[]), nextval({{seqs}})
