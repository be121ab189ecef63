-- The calls of release 0.1.0, whose signatures changed in 0.2.0 (weights:
-- the weight asked, the weight of a hold). Each keeps its 0.1.0 signature
-- and answers as 0.1.0 did, through its successor with weight 1, so that
-- 0.1.0 processes keep working during a rolling upgrade (docs/schema.md,
-- the rolling-upgrade rule). No call of this release sends them; the
-- release after 0.2.0 drops this file, and Migrate then drops them.

CREATE OR REPLACE FUNCTION {{schema}}.acquire_one(p_name text, p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_wait boolean, p_op bigint, p_wttl bigint, p_pats text[], p_lease bigint, p_back bigint,
    p_node bigint)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean,
    r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint, r_fast boolean)
LANGUAGE sql AS $sleeplock$
    SELECT a.r_ev, a.r_idx, a.r_lock, a.r_slots, a.r_running, a.r_waiting, a.r_ref, a.r_kind, a.r_token, a.r_at,
           a.r_expires, a.r_dur, a.r_queued, a.r_ticket, a.r_ttl, a.r_hold, a.r_seq, a.r_fast
      FROM {{schema}}.acquire_one_v2(p_name, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_wttl, p_pats,
                                     p_lease, p_back, p_node, 1) a
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.check_one(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_wait boolean, p_op bigint, p_ticket bigint, p_wttl bigint, p_stale bigint, p_node bigint,
    p_whole boolean)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_expires bigint, r_dur bigint, r_queued boolean,
    r_ticket bigint, r_ttl bigint, r_hold bigint, r_seq bigint)
LANGUAGE sql AS $sleeplock$
    SELECT a.r_ev, a.r_idx, a.r_lock, a.r_slots, a.r_running, a.r_waiting, a.r_ref, a.r_kind, a.r_token, a.r_at,
           a.r_expires, a.r_dur, a.r_queued, a.r_ticket, a.r_ttl, a.r_hold, a.r_seq
      FROM {{schema}}.check_one_v2(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op, p_ticket, p_wttl,
                                   p_stale, p_node, p_whole, array_fill(1, ARRAY[cardinality(p_names)])) a
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.release_one(p_name text, p_token bigint, p_ref text, p_events boolean,
    p_pats text[], p_node bigint)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint, r_seq bigint)
LANGUAGE sql AS $sleeplock$
    SELECT b.r_ev, b.r_idx, b.r_lock, b.r_slots, b.r_running, b.r_waiting, b.r_ref, b.r_kind, b.r_token, b.r_at,
           b.r_dur, b.r_seq
      FROM {{schema}}.release_one_v2(p_name, p_token, p_ref, p_events, p_pats, p_node) b
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.release(p_names text[], p_tokens bigint[], p_ref text, p_stale bigint,
    p_events boolean)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint)
LANGUAGE sql AS $sleeplock$
    SELECT b.r_ev, b.r_idx, b.r_lock, b.r_slots, b.r_running, b.r_waiting, b.r_ref, b.r_kind, b.r_token, b.r_at,
           b.r_dur
      FROM {{schema}}.release_v2(p_names, p_tokens, p_ref, p_stale, p_events) b
$sleeplock$;

CREATE OR REPLACE FUNCTION {{schema}}.undo(p_names text[], p_ref text, p_op bigint)
RETURNS TABLE(r_ev text, r_idx integer, r_lock text, r_slots integer, r_running integer, r_waiting integer,
    r_ref text, r_kind text, r_token bigint, r_at bigint, r_dur bigint)
LANGUAGE sql AS $sleeplock$
    SELECT b.r_ev, b.r_idx, b.r_lock, b.r_slots, b.r_running, b.r_waiting, b.r_ref, b.r_kind, b.r_token, b.r_at,
           b.r_dur
      FROM {{schema}}.undo_v2(p_names, p_ref, p_op) b
$sleeplock$;
