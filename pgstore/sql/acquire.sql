-- Acquisition: acquire(), the general one (several locks, re-entry,
-- takeover, StaleAfter, a waiter's grant), the functions it calls, and
-- check_one(), which runs it for a waiter (the path of one lock is
-- acquire_one.sql). Functions of sql/ are applied at every Migrate with
-- CREATE OR REPLACE; each is defined once, in one of these files.
-- {{schema}} is the quoted schema, {{tokens}}, {{tickets}} and {{seqs}}
-- the sequences as regclass literals. A signature is a contract
-- (docs/schema.md): change one by adding a new name.

-- acquire: the general acquisition of one slot of each lock of p_names
-- (caller's order), all or nothing. p_ticket 0: a new request, granted
-- when for every lock the ref holds it already or fewer live waiters are
-- queued than slots are free; else refused (p_wait false, decided on a
-- plain read of holding: no write, no row lock) or queued. p_ticket > 0:
-- the check of that queued waiter, granted when fewer live waiters are
-- ahead of it than slots are free. Its second pass takes the rows in
-- sorted order (lock_rows(), which spills them) and decides again. Expired
-- leases are taken over when a grant needs their slots; with p_stale > 0,
-- once not renewed for p_stale µs (StaleAfter). With p_whole, a new request
-- whose ref holds some of the locks but not all is refused at the first it
-- holds (re-entry only as a whole). A 'waiting' row carries in
-- r_expires the earliest expiry of the leases that block it. Rows (r_ev):
-- notfound, refused, queued (one per lock), waiting, gone (the waiter row
-- expired), cancelled, expired (a lease taken over), granted / reentered
-- (one per lock, in the caller's order), too_heavy (a lock has fewer slots
-- than asked: refused, or a waiter that a resize left too heavy, dequeued).
-- Weights: p_weights[i] is the slots asked of lock i (1 when NULL; -1:
-- every slot). Slots in use and free are counted with the holders' weights,
-- and the slots the waiters ahead ask with theirs; r_weight is the weight
-- of the hold of the row (granted, reentered, expired), else the one asked.
-- p_sample: time the expired holds taken over whatever their tokens (the
-- store samples by time, as a release's p_sample).
-- A waiter of one lock it queues is node p_node's (0: none, its lease its
-- own). This function decides: the arrays a_* hold, per lock, its slots,
-- the slots asked and the counts; grant_locks() grants, answer_not_now()
-- says why not, enqueue() queues.
CREATE OR REPLACE FUNCTION {{schema}}.acquire(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint, p_counted boolean, p_wait boolean, p_op bigint, p_ticket bigint, p_wttl bigint, p_stale bigint, p_node bigint, p_whole boolean, p_weights integer[], p_sample boolean)
 RETURNS SETOF {{schema}}.acquire_row
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_pass   integer := 0;
    v_bad    integer; -- the first lock that cannot be granted now
    a_slots  integer[]; -- the locks' slots, read on the first pass
    v_since  timestamptz; v_wexp timestamptz; -- waiter p_ticket's
    v_raced  boolean;
    v_races  integer := 0;
    v_before bigint := CASE WHEN p_ticket > 0 THEN p_ticket ELSE 9223372036854775807 END;
    s        record; -- lock_states()'s: the a_* arrays, per lock
    o        {{schema}}.acquire_row;
BEGIN
    IF p_ticket > 0 THEN
        SELECT w.since, w.expires INTO v_since, v_wexp FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
        IF NOT FOUND OR v_wexp <= v_now THEN
            RETURN QUERY SELECT * FROM {{schema}}.answer_gone_waiter(p_names, p_ref, p_op, p_ticket, v_now, FOUND);
            RETURN;
        END IF;
    END IF;

    LOOP
        v_pass := v_pass + 1;
        IF v_pass = 2 THEN
            IF NOT {{schema}}.lock_rows(p_names, true) THEN -- a lock deleted meanwhile
                RETURN QUERY SELECT * FROM {{schema}}.answer_stop('notfound', p_names, 0, 0, 0, 1);
                RETURN;
            ELSIF EXISTS (SELECT 1 FROM {{schema}}.cancelled c WHERE c.op = p_op) THEN
                RETURN QUERY SELECT * FROM {{schema}}.answer_stop('cancelled', p_names, 0, 0, 0, 1);
                RETURN;
            END IF;
            v_now := clock_timestamp();
        END IF;

        -- What each lock looks like now (its slots read on the first pass).
        s := {{schema}}.lock_states(p_names, p_weights, a_slots, p_ref, p_stale, v_now, v_before);
        a_slots := s.a_slots; v_bad := s.r_bad;
        IF s.r_stop IS NOT NULL THEN -- notfound, too_heavy
            RETURN QUERY SELECT * FROM {{schema}}.answer_stop(s.r_stop, p_names, v_bad, p_ticket, s.a_slots[v_bad],
                                                              coalesce(p_weights[v_bad], 1));
            RETURN;
        ELSIF p_whole AND p_ticket = 0 AND true = ANY (s.a_mine) AND false = ANY (s.a_mine) THEN
            -- Re-entry only as a whole: refused at the first lock the ref holds.
            v_bad := array_position(s.a_mine, true);
            RETURN QUERY SELECT * FROM {{schema}}.answer_not_now(p_names[v_bad], v_bad, 0, false, 0, NULL, p_stale,
                v_now, s.a_slots[v_bad], s.a_rows[v_bad], s.a_live[v_bad], s.a_ahead[v_bad], 1, p_ref);
            RETURN;
        END IF;

        IF v_bad = 0 AND v_pass = 2 THEN
            -- Grant, under the rows (grant_locks(): 'blocked' by a lease
            -- renewed right now, or 'raced' by a fast-path grant: decide again).
            v_raced := false;
            FOR o IN SELECT * FROM {{schema}}.grant_locks(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_op,
                    p_ticket, p_stale, v_now, v_since, s.a_slots, s.a_need, s.a_rows, s.a_mine, s.a_total,
                    s.a_wahead, p_sample) LOOP
                IF o.r_ev = 'raced' THEN
                    v_raced := true;
                ELSIF o.r_ev = 'blocked' THEN
                    v_bad := o.r_idx;
                ELSE
                    RETURN NEXT o;
                END IF;
            END LOOP;
            IF v_raced THEN
                v_pass := 1; -- decide again, under the rows
                v_races := v_races + 1;
                CONTINUE WHEN v_races <= 100;
                RAISE EXCEPTION 'sleeplock: acquire of % kept racing', p_names;
            END IF;
            IF v_bad = 0 THEN
                RETURN; -- granted
            END IF;
        END IF;

        CONTINUE WHEN v_bad = 0; -- pass 1 found it grantable: lock and decide again

        -- Not now: a waiter waits, a try is refused, else pass 2 queues.
        RETURN QUERY SELECT * FROM {{schema}}.answer_not_now(p_names[v_bad], v_bad, p_ticket, p_wait, p_wttl, v_wexp,
            p_stale, v_now, s.a_slots[v_bad], s.a_rows[v_bad], s.a_live[v_bad], s.a_ahead[v_bad],
            coalesce(p_weights[v_bad], 1), NULL);
        IF FOUND THEN
            RETURN;
        END IF;
        CONTINUE WHEN v_pass = 1; -- queue under the lock rows
        RETURN QUERY SELECT * FROM {{schema}}.enqueue(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_op, p_wttl,
                                                      p_node, p_weights, v_now, s.a_slots, s.a_rows, s.a_total);
        RETURN;
    END LOOP;
END
$sleeplock$;

-- answer_stop: the answer of acquire() and acquire_one() that ends a
-- request without a grant, at lock p_idx of p_names: 'notfound' (no
-- definition; p_idx 0: at the first lock that has none), 'cancelled' (the
-- acquisition was, see undo()), or 'too_heavy' (asked p_weight slots of a
-- lock of p_slots): refused at once, or waiter p_ticket, left too heavy by
-- a resize, leaves the queue (those behind it may go).
CREATE OR REPLACE FUNCTION {{schema}}.answer_stop(p_ev text, p_names text[], p_idx integer, p_ticket bigint,
    p_slots integer, p_weight integer)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
BEGIN
    IF p_ev = 'notfound' AND p_idx = 0 THEN
        SELECT min(u.i) INTO p_idx FROM unnest(p_names) WITH ORDINALITY u(n, i)
         WHERE {{schema}}.slots_in({{schema}}.patterns(u.n)) IS NULL;
    ELSIF p_ev = 'too_heavy' AND p_ticket > 0 THEN
        DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
        DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
        PERFORM {{schema}}.wake(u, 1) FROM unnest(p_names) u;
    END IF;
    RETURN QUERY SELECT p_ev, coalesce(p_idx, 0), coalesce(p_names[p_idx], ''), coalesce(p_slots, 0), 0, 0, ''::text,
        ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, false, p_ticket, 0::bigint, 0::bigint, p_weight,
        0::bigint, false;
END
$sleeplock$;

-- answer_gone_waiter: the answer to the check of waiter p_ticket whose row
-- is gone (p_have false) or expired at p_now: the grants an earlier check
-- made, whose answer was lost, when p_ref holds every lock of p_names and
-- one by this acquisition (p_op); else 'gone', its place deleted.
CREATE OR REPLACE FUNCTION {{schema}}.answer_gone_waiter(p_names text[], p_ref text, p_op bigint, p_ticket bigint,
    p_now timestamptz, p_have boolean)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
BEGIN
    IF NOT p_have AND (SELECT count(*) FROM {{schema}}.holding h
                        WHERE h.lock = ANY (p_names) AND h.ref = p_ref) = cardinality(p_names)
       AND EXISTS (SELECT 1 FROM {{schema}}.holding h
                    WHERE h.lock = ANY (p_names) AND h.ref = p_ref AND h.op = p_op) THEN
        RETURN QUERY
            SELECT CASE WHEN h.op = p_op THEN 'granted' ELSE 'reentered' END, u.i::int, u.n,
                   {{schema}}.slots_in({{schema}}.patterns(u.n)), {{schema}}.running_of(u.n), ({{schema}}.waiter_counts(u.n, p_now)).r_live,
                   h.ref, h.kind, h.token, {{schema}}.micros(h.acquired), {{schema}}.micros(h.expires),
                   0::bigint, false, p_ticket, h.ttl, h.hold, h.weight,
                   CASE WHEN h.op = p_op THEN nextval({{seqs}}) ELSE 0 END, false
              FROM unnest(p_names) WITH ORDINALITY u(n, i)
              JOIN {{schema}}.holding h ON h.lock = u.n AND h.ref = p_ref
             ORDER BY u.i;
        RETURN;
    END IF;
    IF p_have THEN
        DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
        DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
    END IF;
    RETURN QUERY SELECT 'gone'::text, 0, ''::text, 0, 0, 0, ''::text, ''::text, 0::bigint, 0::bigint, 0::bigint,
        0::bigint, false, p_ticket, 0::bigint, 0::bigint, 1, 0::bigint, false;
END
$sleeplock$;

-- lock_states: what each lock of p_names looks like to acquire() at p_now,
-- in the caller's order: a_slots (read when p_slots is NULL, the first
-- pass; else p_slots), a_need (the slots asked, p_weights), the slots its
-- holders take (a_rows), those of holders still live (a_live: unexpired,
-- or with p_stale > 0 renewed within p_stale µs), whether p_ref holds it
-- (a_mine), the live waiters ahead of ticket p_before (a_ahead: all of
-- them for a new request) and in all (a_total), and the slots those ahead
-- ask (a_wahead). r_bad: the first lock that cannot be granted now (0:
-- none); the walk stops at the first lock with no definition (r_stop
-- 'notfound') or asked more slots than it has by a ref that does not hold
-- it (r_stop 'too_heavy', r_bad that lock).
CREATE OR REPLACE FUNCTION {{schema}}.lock_states(p_names text[], p_weights integer[], p_slots integer[], p_ref text,
    p_stale bigint, p_now timestamptz, p_before bigint, OUT a_slots integer[], OUT a_need integer[],
    OUT a_rows integer[], OUT a_live integer[], OUT a_mine boolean[], OUT a_ahead integer[], OUT a_total integer[],
    OUT a_wahead integer[], OUT r_bad integer, OUT r_stop text)
RETURNS record
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    c record;
    i integer;
BEGIN
    a_slots := coalesce(p_slots, '{}'); a_need := '{}'; a_rows := '{}'; a_live := '{}'; a_mine := '{}';
    a_ahead := '{}'; a_total := '{}'; a_wahead := '{}'; r_bad := 0;
    FOR i IN 1 .. cardinality(p_names) LOOP
        IF p_slots IS NULL THEN
            a_slots[i] := {{schema}}.slots_in({{schema}}.patterns(p_names[i]));
            IF a_slots[i] IS NULL THEN
                r_stop := 'notfound'; r_bad := i;
                RETURN;
            END IF;
        END IF;
        a_need[i] := {{schema}}.need(coalesce(p_weights[i], 1), a_slots[i]);
        SELECT * INTO c
          FROM (SELECT coalesce(sum(h.weight), 0)::int AS n,
                       coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR NOT CASE WHEN p_stale > 0
                            THEN h.renewed <= p_now - p_stale * interval '1 microsecond'
                            ELSE h.expires <= p_now END), 0)::int AS live,
                       coalesce(bool_or(h.ref = p_ref), false) AS mine
                  FROM {{schema}}.holding h WHERE h.lock = p_names[i]) h,
               (SELECT count(*) FILTER (WHERE q.ticket < p_before)::int AS ahead, count(*)::int AS total,
                       coalesce(sum({{schema}}.need(q.weight, a_slots[i])) FILTER (WHERE q.ticket < p_before),
                                0)::int AS wahead
                  FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
                 WHERE q.lock = p_names[i] AND w.expires > p_now) w;
        a_rows[i] := c.n; a_live[i] := c.live; a_mine[i] := c.mine;
        a_ahead[i] := c.ahead; a_total[i] := c.total; a_wahead[i] := c.wahead;
        IF NOT a_mine[i] AND a_need[i] > a_slots[i] THEN
            r_stop := 'too_heavy'; r_bad := i;
            RETURN;
        END IF;
        IF r_bad = 0 AND NOT a_mine[i] AND a_wahead[i] + a_need[i] > a_slots[i] - a_live[i] THEN
            r_bad := i;
        END IF;
    END LOOP;
END
$sleeplock$;

-- grant_locks: acquire()'s grant of p_names under their rows, the counts
-- of each lock in the a_* arrays (acquire()'s, as of p_now). First the
-- expired leases a grant needs (with p_stale > 0, those not renewed for
-- p_stale µs) are locked, of every lock, so that a lease being renewed or
-- guarded right now makes it give up (one row 'blocked', r_idx the lock,
-- nothing changed) instead of waiting for it. Then it takes them over
-- (a row 'expired' each), and grant_holds() gives every other lock a
-- free slot number (one row 'raced' when a fast-path grant took one
-- meanwhile, after which acquire() decides again), dequeues waiter
-- p_ticket and returns the rows 'granted' or 'reentered' (renewed), one
-- per lock in the caller's order.
CREATE OR REPLACE FUNCTION {{schema}}.grant_locks(p_names text[], p_ref text, p_kind text, p_ttl bigint,
    p_hold bigint, p_counted boolean, p_op bigint, p_ticket bigint, p_stale bigint, p_now timestamptz,
    p_since timestamptz, a_slots integer[], a_need integer[], a_rows integer[], a_mine boolean[],
    a_total integer[], a_wahead integer[], p_sample boolean)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    o       {{schema}}.acquire_row;
    n       integer := cardinality(p_names);
    -- the lease: expires hold (or ttl) from now, renewed dated back by ttl-hold
    v_lease bigint := CASE WHEN p_hold > 0 AND p_hold < p_ttl THEN p_hold ELSE p_ttl END;
    v_exp   timestamptz;
    v_renew timestamptz;
    i       integer;
    k       integer;
    r       record;
    -- the expired holds to take over: lock index, ref, kind, token, acquired, weight
    t_idx   integer[] := '{}'; t_ref text[] := '{}'; t_kind text[] := '{}';
    t_token bigint[] := '{}'; t_acq timestamptz[] := '{}'; t_w integer[] := '{}';
BEGIN
    o := (NULL, 0, '', 0, 0, 0, '', '', 0, 0, 0, 0, false, 0, 0, 0, 1, 0, false)::{{schema}}.acquire_row;
    FOR i IN 1 .. n LOOP
        IF NOT a_mine[i] AND a_slots[i] - a_rows[i] < a_wahead[i] + a_need[i] THEN
            k := 0;
            FOR r IN SELECT h.ref, h.kind, h.token, h.acquired, h.weight FROM {{schema}}.holders h
                      WHERE h.lock = p_names[i] AND h.expires IS NOT NULL
                        AND CASE WHEN p_stale > 0 THEN h.renewed <= p_now - p_stale * interval '1 microsecond'
                                 ELSE h.expires <= p_now END
                      ORDER BY h.token FOR UPDATE SKIP LOCKED LOOP
                t_idx := t_idx || i; t_ref := t_ref || r.ref; t_kind := t_kind || r.kind;
                t_token := t_token || r.token; t_acq := t_acq || r.acquired; t_w := t_w || r.weight;
                k := k + r.weight;
            END LOOP;
            IF a_slots[i] - (a_rows[i] - k) < a_wahead[i] + a_need[i] THEN
                o.r_ev := 'blocked'; o.r_idx := i;
                RETURN NEXT o;
                RETURN;
            END IF;
        END IF;
    END LOOP;

    FOR k IN 1 .. coalesce(cardinality(t_idx), 0) LOOP
        i := t_idx[k];
        DELETE FROM {{schema}}.holders h WHERE h.lock = p_names[i] AND h.ref = t_ref[k];
        PERFORM {{schema}}.tally(p_names[i], 0, NULL, 0, 1, 1, {{schema}}.micros(p_now) - {{schema}}.micros(t_acq[k]),
            p_sample OR {{schema}}.timed(t_token[k]));
        a_rows[i] := a_rows[i] - t_w[k];
        o.r_ev := 'expired'; o.r_idx := i; o.r_lock := p_names[i]; o.r_slots := a_slots[i]; o.r_running := a_rows[i];
        o.r_waiting := a_total[i]; o.r_ref := t_ref[k]; o.r_kind := t_kind[k]; o.r_token := t_token[k];
        o.r_weight := t_w[k];
        o.r_at := {{schema}}.micros(p_now); o.r_dur := {{schema}}.micros(p_now) - {{schema}}.micros(t_acq[k]);
        o.r_seq := nextval({{seqs}});
        RETURN NEXT o;
    END LOOP;
    v_exp := CASE WHEN p_ttl > 0 THEN p_now + v_lease * interval '1 microsecond' END;
    v_renew := CASE WHEN p_ttl > 0 THEN p_now - (p_ttl - v_lease) * interval '1 microsecond' ELSE p_now END;
    RETURN QUERY SELECT * FROM {{schema}}.grant_holds(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_op,
        p_ticket, p_now, p_since, v_renew, v_exp, a_slots, a_need, a_rows, a_mine, a_total);
END
$sleeplock$;

-- grant_holds: the end of grant_locks() (and acquire_one()'s step 5),
-- under the rows: a holder row for p_ref in each lock of p_names it does
-- not hold (a_mine), of a_need slots, in the lock's first free slot number
-- (unique per lock: the database itself refuses a second holder of a
-- slot, also to a concurrent fast-path grant that takes no lock row; when
-- one took it meanwhile, or none is free, what this call inserted is
-- deleted, and one row 'raced' makes the caller decide again). Then waiter p_ticket leaves the queue (the slots
-- left over wake those behind), the holds p_ref held are renewed (a row
-- 'reentered' each: its own lease, count and op when p_counted), the new
-- ones counted (a row 'granted' each, with the wait of waiter p_ticket
-- since p_since), one row per lock in the caller's order.
CREATE OR REPLACE FUNCTION {{schema}}.grant_holds(p_names text[], p_ref text, p_kind text, p_ttl bigint,
    p_hold bigint, p_counted boolean, p_op bigint, p_ticket bigint, p_now timestamptz, p_since timestamptz,
    p_renew timestamptz, p_exp timestamptz, a_slots integer[], a_need integer[], a_rows integer[],
    a_mine boolean[], a_total integer[])
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    o       {{schema}}.acquire_row;
    a_tok   bigint[] := array_fill(0::bigint, ARRAY[cardinality(p_names)]);
    v_slot  integer;
    v_token bigint;
    i       integer;
    k       integer;
    r       record;
BEGIN
    o := (NULL, 0, '', 0, 0, 0, '', '', 0, 0, 0, 0, false, 0, 0, 0, 1, 0, false)::{{schema}}.acquire_row;
    FOR i IN 1 .. cardinality(p_names) LOOP
        CONTINUE WHEN a_mine[i];
        -- (the rows are spilled: lock_rows(); holding is the holder rows)
        v_slot := {{schema}}.free_slot(p_names[i], a_slots[i]);
        v_token := NULL;
        IF v_slot IS NOT NULL THEN
            INSERT INTO {{schema}}.holders (lock, ref, kind, token, slot, count, acquired, renewed, expires, ttl, hold,
                                            op, weight)
            VALUES (p_names[i], p_ref, p_kind, {{schema}}.next_token(), v_slot, 1, p_now, p_renew, p_exp, p_ttl, p_hold,
                    p_op, a_need[i])
            ON CONFLICT DO NOTHING
            RETURNING token INTO v_token;
        END IF;
        IF v_token IS NULL THEN
            DELETE FROM {{schema}}.holders h WHERE h.ref = p_ref AND h.token = ANY (a_tok) AND h.lock = ANY (p_names);
            o.r_ev := 'raced';
            RETURN NEXT o;
            RETURN;
        END IF;
        a_tok[i] := v_token;
    END LOOP;
    IF p_ticket > 0 THEN
        DELETE FROM {{schema}}.queue q WHERE q.ticket = p_ticket;
        DELETE FROM {{schema}}.waiters w WHERE w.ticket = p_ticket;
        FOR i IN 1 .. cardinality(p_names) LOOP
            k := a_slots[i] - a_rows[i] - CASE WHEN a_mine[i] THEN 0 ELSE a_need[i] END;
            IF k > 0 AND a_total[i] > 1 THEN
                PERFORM {{schema}}.wake(p_names[i], k);
            END IF;
        END LOOP;
    END IF;
    FOR i IN 1 .. cardinality(p_names) LOOP
        IF a_mine[i] THEN
            UPDATE {{schema}}.holders h
               SET count   = h.count + CASE WHEN p_counted THEN 1 ELSE 0 END,
                   op      = CASE WHEN p_counted THEN p_op ELSE h.op END,
                   ttl     = CASE WHEN p_ttl > 0 THEN p_ttl ELSE h.ttl END,
                   hold    = CASE WHEN p_ttl > 0 THEN p_hold ELSE h.hold END,
                   renewed = CASE WHEN p_ttl > 0 THEN p_renew ELSE h.renewed END,
                   expires = CASE WHEN p_ttl > 0 THEN p_exp ELSE h.expires END
             WHERE h.lock = p_names[i] AND h.ref = p_ref
            RETURNING h.kind, h.token, h.acquired, h.expires, h.ttl, h.hold, h.weight INTO r;
            IF NOT FOUND THEN
                -- Released by its own ref meanwhile (a fast-path release
                -- takes no lock row): let the caller try again.
                RAISE EXCEPTION 'sleeplock: the hold of % on % was released while re-entered', p_ref, p_names[i]
                    USING ERRCODE = '40001';
            END IF;
            o.r_ev := 'reentered'; o.r_running := a_rows[i]; o.r_kind := r.kind; o.r_token := r.token;
            o.r_at := {{schema}}.micros(r.acquired); o.r_expires := {{schema}}.micros(r.expires); o.r_dur := 0;
            o.r_ttl := r.ttl; o.r_hold := r.hold; o.r_weight := r.weight; o.r_seq := 0;
        ELSE
            o.r_ev := 'granted'; o.r_running := a_rows[i] + a_need[i]; o.r_kind := p_kind; o.r_token := a_tok[i];
            o.r_at := {{schema}}.micros(p_now); o.r_expires := {{schema}}.micros(p_exp);
            o.r_dur := CASE WHEN p_ticket > 0 THEN {{schema}}.micros(p_now) - {{schema}}.micros(p_since) ELSE 0 END;
            o.r_ttl := p_ttl; o.r_hold := p_hold; o.r_weight := a_need[i]; o.r_seq := nextval({{seqs}});
            PERFORM {{schema}}.tally(p_names[i], 1, CASE WHEN p_ticket > 0 THEN o.r_dur END, 0, 0, 0, NULL, false);
        END IF;
        o.r_idx := i; o.r_lock := p_names[i]; o.r_slots := a_slots[i]; o.r_ref := p_ref; o.r_ticket := p_ticket;
        o.r_waiting := a_total[i] - CASE WHEN p_ticket > 0 THEN 1 ELSE 0 END;
        RETURN NEXT o;
    END LOOP;
END
$sleeplock$;

-- answer_not_now: acquire()'s answer when lock p_name (index p_idx, of
-- p_slots slots, p_rows in use, p_live live, p_ahead live waiters ahead)
-- cannot be granted now: for waiter p_ticket, 'waiting' (its lease
-- renewed when a third of it is gone; r_expires: the earliest expiry of
-- the leases that block it); for a try (not p_wait), 'refused' with the
-- oldest unexpired holder (none when only the queue refused: a slot is
-- free, but others wait), or with the hold of p_holder (not NULL: a
-- request with re-entry only as a whole whose ref holds this lock but not
-- all). No row: the caller queues.
CREATE OR REPLACE FUNCTION {{schema}}.answer_not_now(p_name text, p_idx integer, p_ticket bigint, p_wait boolean,
    p_wttl bigint, p_wexp timestamptz, p_stale bigint, p_now timestamptz, p_slots integer, p_rows integer,
    p_live integer, p_ahead integer, p_weight integer, p_holder text)
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_ref   text;
    v_kind  text;
    v_token bigint;
    v_exp   timestamptz;
BEGIN
    IF p_ticket > 0 THEN
        IF p_wexp - p_now < (p_wttl * 2 / 3) * interval '1 microsecond' THEN
            UPDATE {{schema}}.waiters w SET expires = p_now + p_wttl * interval '1 microsecond'
             WHERE w.ticket = p_ticket;
        END IF;
        RETURN QUERY SELECT 'waiting'::text, p_idx, p_name, p_slots, 0, 0, ''::text, ''::text, 0::bigint,
            {{schema}}.micros(p_now), (SELECT {{schema}}.micros(min(h.expires)) FROM {{schema}}.holding h
                                        WHERE h.lock = p_name AND h.expires > p_now),
            0::bigint, false, p_ticket, 0::bigint, 0::bigint, p_weight, 0::bigint, false;
        RETURN;
    END IF;
    IF p_wait THEN
        RETURN;
    END IF;
    IF p_live >= p_slots OR p_ahead = 0 OR p_holder IS NOT NULL THEN
        SELECT x.ref, x.kind, x.token, x.expires INTO v_ref, v_kind, v_token, v_exp FROM {{schema}}.holding x
         WHERE x.lock = p_name AND CASE WHEN p_holder IS NOT NULL THEN x.ref = p_holder
                ELSE x.expires IS NULL OR NOT CASE WHEN p_stale > 0
                     THEN x.renewed <= p_now - p_stale * interval '1 microsecond' ELSE x.expires <= p_now END END
         ORDER BY x.token LIMIT 1;
    END IF;
    RETURN QUERY SELECT 'refused'::text, p_idx, p_name, p_slots, p_rows, p_ahead, coalesce(v_ref, ''),
        coalesce(v_kind, ''), coalesce(v_token, 0), {{schema}}.micros(p_now), {{schema}}.micros(v_exp),
        (p_slots - p_live)::bigint, -- r_dur of a refusal: the slots free (BusyError.Free)
        v_ref IS NULL, 0::bigint, 0::bigint, 0::bigint, p_weight, 0::bigint, false;
END
$sleeplock$;

-- enqueue: queues the caller for every lock of p_names (their rows taken,
-- slow): a ticket from the global sequence, a waiter row, one queue row
-- per lock, and one row 'queued' per lock with its counts before (p_slots,
-- p_rows, p_total) and the event's Seq. A waiter of one lock of node
-- p_node (not 0) is its node's: its lease the node's (its row made sure
-- not stale first, with no write while it has more than 30 % of its lease
-- left), its commit asynchronous (soft state only). Any other keeps a lease of its
-- own, p_wttl, renewed by its checks.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint,
    p_counted boolean, p_op bigint, p_wttl bigint, p_node bigint, p_weights integer[], p_now timestamptz,
    p_slots integer[], p_rows integer[], p_total integer[])
RETURNS SETOF {{schema}}.acquire_row
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_ticket bigint := nextval({{tickets}});
    v_own    boolean := p_node <> 0 AND cardinality(p_names) = 1;
BEGIN
    IF v_own THEN
        PERFORM 1 FROM {{schema}}.nodes n
          WHERE n.id = p_node AND n.expires >= p_now + (p_wttl * 3 / 10) * interval '1 microsecond';
        IF NOT FOUND THEN
            INSERT INTO {{schema}}.nodes (id, expires, wttl)
            VALUES (p_node, p_now + p_wttl * interval '1 microsecond', p_wttl)
            ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, wttl = excluded.wttl;
        END IF;
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    INSERT INTO {{schema}}.waiters (ticket, op, ref, kind, locks, ttl, hold, counted, since, expires, wttl, node)
    VALUES (v_ticket, p_op, p_ref, p_kind, p_names, p_ttl, p_hold, p_counted, p_now,
            CASE WHEN v_own THEN {{schema}}.node_lease_sentinel() ELSE p_now + p_wttl * interval '1 microsecond' END,
            CASE WHEN v_own THEN p_wttl END, CASE WHEN v_own THEN p_node END);
    INSERT INTO {{schema}}.queue (lock, ticket, own, weight)
    SELECT u.n, v_ticket, v_own, coalesce(p_weights[u.i], 1) FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
    RETURN QUERY SELECT 'queued'::text, u.i::int, u.n, p_slots[u.i], p_rows[u.i], p_total[u.i] + 1, p_ref, p_kind,
        0::bigint, {{schema}}.micros(p_now), 0::bigint, 0::bigint, false, v_ticket, 0::bigint, 0::bigint,
        coalesce(p_weights[u.i], 1), nextval({{seqs}}), false
      FROM unnest(p_names) WITH ORDINALITY u(n, i) ORDER BY u.i;
END
$sleeplock$;

-- check_one: a waiter's check (p_ticket > 0), and the first call of an
-- acquisition of several locks or with StaleAfter (p_ticket 0). A waiter
-- of one lock takes the lock's row first, then finds the grant a release
-- made for it (holders.handed), or answers 'waiting' on the holder rows
-- alone when the lock is full of unexpired holders; everything else is
-- acquire()'s, after reaping (p_whole: re-entry only as a whole, see
-- acquire()). p_weights: the weight asked of each lock. Rows: acquire()'s,
-- with the event's Seq (r_fast false).
CREATE OR REPLACE FUNCTION {{schema}}.check_one(p_names text[], p_ref text, p_kind text, p_ttl bigint, p_hold bigint, p_counted boolean, p_wait boolean, p_op bigint, p_ticket bigint, p_wttl bigint, p_stale bigint, p_node bigint, p_whole boolean, p_weights integer[],
    p_sample boolean)
 RETURNS SETOF {{schema}}.acquire_row
 LANGUAGE plpgsql
AS $sleeplock$
#variable_conflict use_column
DECLARE
    g       bigint[];
    v_now   timestamptz;
    v_slots integer;
    f       record;
BEGIN
    IF p_ticket > 0 AND cardinality(p_names) = 1 THEN
        -- The lock's row first: a release handing this waiter its slot
        -- either committed before (and is seen below) or waits until this
        -- statement ends (and finds the waiter granted, or still queued).
        -- Without it, acquire() could meet the handed hold half way and
        -- take it for a re-entry, or for a grant whose answer was lost.
        PERFORM {{schema}}.spill(p_names[1]);
        SELECT h.handed INTO g FROM {{schema}}.holders h
         WHERE h.lock = p_names[1] AND h.ref = p_ref AND h.op = p_op;
        IF g IS NOT NULL AND g[1] = p_op AND g[2] = p_ticket THEN
            RETURN QUERY SELECT 'granted'::text, 1, p_names[1], g[7]::int, g[8]::int, g[9]::int, p_ref, p_kind, g[3],
                g[4], g[5], g[10], false, p_ticket, p_ttl, p_hold,
                {{schema}}.need(coalesce(p_weights[1], 1), g[7]::int), g[6], false;
            RETURN;
        END IF;
        v_now := clock_timestamp();
        IF p_stale = 0 AND NOT {{schema}}.nodes_stale(v_now) THEN
            -- Still waiting, on the holder rows alone: a waiter its node
            -- keeps, of a lock whose slots are all held by unexpired
            -- holders other than its ref, waits whatever the queue holds
            -- (unless a resize left it too heavy: acquire() ends it).
            -- acquire() would answer the same after counting the queue;
            -- this is what a head's periodic check costs. (While a node is
            -- stale a holder may be a grant that ended with its node:
            -- acquire() decides, after reaping.)
            SELECT coalesce(sum(h.weight) FILTER (WHERE h.expires IS NULL OR h.expires > v_now), 0)::int AS live,
                   coalesce(bool_or(h.ref = p_ref), false) AS mine,
                   min(h.expires) FILTER (WHERE h.expires > v_now) AS next
              INTO f
              FROM {{schema}}.holders h WHERE h.lock = p_names[1];
            v_slots := {{schema}}.slots_in({{schema}}.patterns(p_names[1]));
            IF NOT f.mine AND f.live >= v_slots
               AND EXISTS (SELECT 1 FROM {{schema}}.waiters w
                            WHERE w.ticket = p_ticket AND w.op = p_op AND w.node = p_node
                              AND w.expires = {{schema}}.node_lease_sentinel())
               AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q
                                WHERE q.ticket = p_ticket AND q.lock = p_names[1] AND q.weight > v_slots) THEN
                RETURN QUERY SELECT 'waiting'::text, 1, p_names[1], v_slots, 0, 0, ''::text, ''::text, 0::bigint,
                    {{schema}}.micros(v_now), {{schema}}.micros(f.next), 0::bigint, false, p_ticket, 0::bigint,
                    0::bigint, coalesce(p_weights[1], 1), 0::bigint, false;
                RETURN;
            END IF;
        END IF;
    END IF;
    IF p_ticket > 0 AND cardinality(p_names) > 1 THEN
        -- The rows first, in acquire()'s order: a check that finds its
        -- waiter gone deletes its queue rows, whose trigger updates the
        -- locks' rows (see locks.queued).
        PERFORM {{schema}}.lock_rows(p_names, false);
    END IF;
    v_now := clock_timestamp();
    IF {{schema}}.nodes_stale(v_now) THEN
        -- acquire()'s first pass judges the queues without their rows:
        -- they are reaped (see reap()) first, under their rows.
        PERFORM {{schema}}.lock_rows(p_names, false);
        PERFORM {{schema}}.reap(u, v_now, true) FROM unnest(p_names) u;
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.acquire(p_names, p_ref, p_kind, p_ttl, p_hold, p_counted, p_wait, p_op,
        p_ticket, p_wttl, p_stale, p_node, p_whole, p_weights, p_sample);
    IF EXISTS (SELECT 1 FROM {{schema}}.waiters w WHERE w.op = p_op)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = ANY (p_names) AND h.op = p_op) THEN
        -- Still waiting (or queued again): nothing but soft state changed.
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
END
$sleeplock$;

-- lock_rows: takes and spills the rows of p_names in sorted order (no
-- deadlock between callers naming them in other orders), skipping the
-- missing ones; with p_create (acquire()'s second pass) creates them
-- (make_row()) and then drops the dead waiters of their queues (of dead
-- or paused nodes). False when a row to create was not: no definition
-- covers its name any more.
CREATE OR REPLACE FUNCTION {{schema}}.lock_rows(p_names text[], p_create boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    IF cardinality(p_names) > 1 THEN
        p_names := ARRAY(SELECT DISTINCT u FROM unnest(p_names) u ORDER BY u);
    END IF;
    FOREACH v_name IN ARRAY p_names LOOP
        LOOP
            EXIT WHEN {{schema}}.spill(v_name) OR NOT p_create;
            IF {{schema}}.make_row(v_name) IS NULL THEN
                RETURN false;
            END IF;
        END LOOP;
    END LOOP;
    IF p_create THEN
        PERFORM {{schema}}.drop_dead(u, clock_timestamp(), 64) FROM unnest(p_names) u;
    END IF;
    RETURN true;
END
$sleeplock$;

-- make_row: makes the row of lock p_name (slow, free) unless it exists:
-- true when this call made it, false when it existed, NULL (nothing made)
-- when no definition covers the name. The one statement that inserts a
-- lock's row. It takes the definitions' advisory lock (defs_key()) shared
-- first, and reads the definition after it: a Delete, which takes that
-- lock exclusively before any row, either committed before (no definition
-- here, no row made) or waits until this transaction ends and then finds
-- the row and what was granted in it. Without it, a row made after the
-- Delete looked for it (the insert waiting behind another transaction's)
-- outlived its definition, with a hold in it. A caller that holds other
-- rows may meet a Delete waiting for them: a deadlock, rolled back and
-- retried (rare: the lock is being deleted).
CREATE OR REPLACE FUNCTION {{schema}}.make_row(p_name text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $sleeplock$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({{schema}}.defs_key());
    IF {{schema}}.slots_in({{schema}}.patterns(p_name)) IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO {{schema}}.locks (name) VALUES (p_name) ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$sleeplock$;
