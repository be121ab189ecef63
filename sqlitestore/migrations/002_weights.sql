-- Weights (issue 21): a hold takes weight of its lock's slots, and a
-- waiter asks weight of each lock it queues for (-1: every slot, as many
-- as the lock has when it is granted).
ALTER TABLE holders ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;
ALTER TABLE queue ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;
