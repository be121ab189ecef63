-- sleeplock schema: weights (issue 21). A hold takes weight of its lock's
-- slots; a waiter asks weight of each lock it queues for (-1: every slot,
-- as many as the lock has when it is granted). Weights other than 1 live
-- only in holder rows: a fast row (scalar or slot mode) holds weight-1
-- holds, one per slot, so the view says 1 for them.
ALTER TABLE {{schema}}.holders ADD COLUMN weight integer NOT NULL DEFAULT 1;
ALTER TABLE {{schema}}.queue ADD COLUMN weight integer NOT NULL DEFAULT 1;

CREATE OR REPLACE VIEW {{schema}}.holding AS
SELECT h.lock, h.ref, h.kind, h.token, h.slot, h.count, h.acquired, h.renewed, h.expires, h.ttl, h.hold, h.op, h.weight
  FROM {{schema}}.holders h
UNION ALL
SELECT l.name, l.ref, l.kind, l.token, 1, 1, l.acquired, l.renewed, l.expires, l.ttl, l.hold, l.op, 1
  FROM {{schema}}.locks l
 WHERE l.fast AND l.ref IS NOT NULL AND l.xref IS NULL
UNION ALL
SELECT l.name, s.ref, s.kind, s.token, s.slot::integer, 1, s.acquired, s.renewed, s.expires, s.ttl, s.hold, s.op, 1
  FROM {{schema}}.locks l
 CROSS JOIN LATERAL unnest(l.xref, l.xkind, l.xtoken, l.xacquired, l.xrenewed, l.xexpires, l.xttl, l.xhold, l.xop)
       WITH ORDINALITY s(ref, kind, token, acquired, renewed, expires, ttl, hold, op, slot)
 WHERE l.fast AND l.xref IS NOT NULL AND s.ref IS NOT NULL;
