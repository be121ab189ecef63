-- sleeplock schema: weights (issue 21). A hold takes weight of its lock's
-- slots; a waiter asks weight of each lock it queues for (-1: every slot,
-- as many as the lock has when it is granted). A weighted hold lives in a
-- holder row, or as the one holder of a fast row in scalar mode that it
-- found entirely free (acquire_weighted.sql); a slot of slot mode is of
-- weight 1.
ALTER TABLE {{schema}}.holders ADD COLUMN weight integer NOT NULL DEFAULT 1;
ALTER TABLE {{schema}}.queue ADD COLUMN weight integer NOT NULL DEFAULT 1;

-- The weight of the holder of a row in scalar mode: weight, granted with
-- wacqs = the row's acqs after that grant. Every grant in the row counts
-- in acqs (also the weight-1 statements, which do not know these columns:
-- those of this release and of 0.1.0), so weight is that holder's only
-- while acqs = wacqs, and a weight-1 holder's is 1 with no reset when a
-- weighted holder is released.
ALTER TABLE {{schema}}.locks ADD COLUMN weight integer NOT NULL DEFAULT 1;
ALTER TABLE {{schema}}.locks ADD COLUMN wacqs bigint;

CREATE OR REPLACE VIEW {{schema}}.holding AS
SELECT h.lock, h.ref, h.kind, h.token, h.slot, h.count, h.acquired, h.renewed, h.expires, h.ttl, h.hold, h.op, h.weight
  FROM {{schema}}.holders h
UNION ALL
SELECT l.name, l.ref, l.kind, l.token, 1, 1, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op,
       CASE WHEN l.wacqs = l.acqs THEN l.weight ELSE 1 END
  FROM {{schema}}.locks l
 WHERE l.fast AND l.ref IS NOT NULL AND l.xref IS NULL
UNION ALL
SELECT l.name, s.ref, s.kind, s.token, s.slot::integer, 1, s.acquired, s.renewed, s.expires, s.ttl, s.hold, s.op, 1
  FROM {{schema}}.locks l
 CROSS JOIN LATERAL unnest(l.xref, l.xkind, l.xtoken, l.xacquired, l.xrenewed, l.xexpires, l.xttl, l.xhold, l.xop)
       WITH ORDINALITY s(ref, kind, token, acquired, renewed, expires, ttl, hold, op, slot)
 WHERE l.fast AND l.xref IS NOT NULL AND s.ref IS NOT NULL;
