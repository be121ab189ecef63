-- common.lua: what every function of redisstore's library shares (see
-- scripts.go; the keys are listed in doc.go). A function's state is its
-- call's (begin): ARGV[1] the key prefix, ARGV[2] the calling node, the
-- server's clock read once.

-- memo returns f, a pure function of a string, remembering up to 256
-- results: the only state that outlives a call, never stale.
local function memo(f)
  local m, n = {}, 0
  return function(k)
    local v = m[k]
    if v == nil then
      v = f(k)
      if n >= 256 then m, n = {}, 0 end
      m[k], n = v, n + 1
    end
    return v
  end
end

-- tonum is tonumber for recurring numbers: a lookup costs a third of strtod.
local tonum = memo(function(s) return tonumber(s) end)

local function servertime()
  local t = redis.call('TIME')
  return tonum(t[1]) * 1000000 + tonumber(t[2])
end

-- begin returns the state of one call: ro for a call that writes nothing
-- (dead waiters are skipped, not removed); what it read and will write
-- (defs, last, hws, alive, locks in load order, stats); ev, the events for
-- the caller; msg, node -> its messages, loc the calling node's; me, the
-- calling waiter's id, and mine, its grant, when advance made it.
local function begin(argv)
  return {p = argv[1], node = argv[2], now = servertime(), ro = false, defs = {}, last = {}, hws = {},
    alive = {}, locks = {}, order = {}, stats = {}, ev = {}, msg = {}, me = '', mine = nil, loc = {}}
end

-- num formats an integer: '%d' is exact to 2^53, a third of '%.0f'.
local function num(x) return string.format('%d', x) end

local function root(name)
  local i = string.find(name, '/', 2, true)
  local r = name
  if i then r = string.sub(name, 1, i - 1) end
  if string.find(r, '[{}]') then
    r = (string.gsub(r, '.', function(c) return string.format('%02x', string.byte(c)) end))
  end
  return r
end

local function rootkey(cx, r, s) return cx.p .. '{' .. r .. '}:' .. s end
local function tagkey(cx, name, s) return rootkey(cx, root(name), s) end

-- sub returns t[k], a table, made when missing.
local function sub(t, k)
  local v = t[k]
  if not v then v = {}; t[k] = v end
  return v
end

-- members returns the names with a record in state hash k (P{R}:s).
local function members(k)
  local out = {}
  for _, f in ipairs(redis.call('HKEYS', k)) do
    if f ~= '' and not string.find(f, '\t', 1, true) then out[#out + 1] = f end
  end
  return out
end

local function isfamily(name) return #name > 2 and string.sub(name, -2) == '/*' end

-- famof returns the names that may define name: name, then the families
-- that cover it, most specific first (a "/" after the first byte and
-- before the last cuts a family).
local famof = memo(function(name)
  local out, i = {name}, string.find(name, '/', 2, true)
  while i and i < #name do
    table.insert(out, 2, string.sub(name, 1, i - 1) .. '/*')
    i = string.find(name, '/', i + 1, true)
  end
  return out
end)

-- definition returns the definition covering name in hash dk, and its slots.
local function definition(dk, name)
  local ps = famof(name)
  local vs = redis.call('HMGET', dk, unpack(ps))
  for i = 1, #ps do
    if vs[i] then return ps[i], tonum(vs[i]) end
  end
end

-- defof is definition, read once per call.
local function defof(cx, name)
  local d = cx.defs[name]
  if not d then
    d = {definition(tagkey(cx, name, 'd'), name)}
    cx.defs[name] = d
  end
  return d[1], d[2]
end

-- nextid draws a token or sequence number: the server's clock in µs,
-- raised past the last one drawn under name's root.
local function nextid(cx, name)
  local k = tagkey(cx, name, 's')
  local v = cx.hws[k] or cx.last[k]
  if not v then v = tonumber(redis.call('HGET', k, '') or '0') end
  if v + 1 > cx.now then v = v + 1 else v = cx.now end
  cx.hws[k] = v
  return v
end

-- nodeUntil returns until when (µs) node's waiters under name's root
-- count as alive, read once per call.
local function nodeUntil(cx, name, node)
  local k = tagkey(cx, name, 'n')
  local c = sub(cx.alive, k)
  local v = c[node]
  if v == nil then
    v = tonumber(redis.call('HGET', k, node) or '0')
    c[node] = v
  end
  return v
end

local function nodeAlive(cx, name, node) return nodeUntil(cx, name, node) > cx.now end

local function need(w, slots)
  if w == -1 then return slots end
  return w == 0 and 1 or w
end

-- publish sends m to node at the end (flush), or in the reply.
local function publish(cx, node, m)
  local l = node == cx.node and cx.loc or sub(cx.msg, node)
  l[#l + 1] = m
end

-- Counters of a definition: field "definition\tc" of P{R}:s, a tally
-- (msgpack, 0 where absent) of the counters below, then the waits of each
-- bucket b (WAIT_BUCKETS + b) and the holds (HOLD_BUCKETS + b). A call adds
-- its tally at the end (flush); a record keeps fast.lua's grants (uncounted
-- holders) and releases (its tally) until the general path writes it
-- (save). Releases and holds are the hold buckets' sums (see stats.lua).
local ACQS, EXPIRIES, LOSSES, WAITED, WAIT_US, HOLD_US = 1, 2, 3, 4, 5, 6
local BOUNDS = {1000, 4000, 16000, 64000, 256000, 1024000, 4096000, 16384000, 65536000, 262144000, 1048576000}
local WAIT_BUCKETS, HOLD_BUCKETS = 6, 6 + #BOUNDS + 1

local function add(t, i, n) t[i] = (t[i] or 0) + n end

-- bucket returns the bucket of d µs: the first bound it does not pass.
local function bucket(d)
  for j, x in ipairs(BOUNDS) do
    if d <= x then return j end
  end
  return #BOUNDS + 1
end

-- timed adds d µs (0 if negative) to counter i of tally t, and one to its
-- bucket after b.
local function timed(t, i, b, d)
  d = math.max(d, 0)
  add(t, i, d)
  add(t, b + bucket(d), 1)
end

local function merge(into, t) for i, n in pairs(t) do add(into, i, n) end end

-- A record with no queue and no grant unclaimed is flat, read and
-- written without MessagePack: FLAT, the tally (TALLY: acquisitions,
-- hold µs in all, the holds of each bucket) of fast.lua's releases, then
-- each holder (HOLDER: t a l o w e n c, 1 when the counters have its
-- acquisition, the lengths of r k d i, then those four). Any other record
-- is MessagePack: its queue's length, its holders (see load).
local FLAT = '\193' -- a byte no MessagePack value starts with
local TALLY = '<i8i8i8i8i8i8i8i8i8i8i8i8i8i8' -- 3 + #BOUNDS (no string library while loading)
local HOLDER = '<i8i8i8i8i8i8i8i8BI4I4I4I4'
local Z = '\0\0\0\0\0\0\0\0'
local EMPTY = FLAT .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z .. Z -- no holder, a tally of zeros
local HOLDERS = #EMPTY + 1 -- where a flat record's holders start

local function flat(raw) return string.byte(raw) == 193 end

-- flatholder returns holder h in the flat layout.
local function flatholder(h, counted)
  return struct.pack(HOLDER, h.t, h.a, h.l, h.o, h.w, h.e, h.n, h.c, counted, #h.r, #h.k, #h.d, #h.i) ..
    h.r .. h.k .. h.d .. h.i
end

-- readholder returns the holder of flat record raw at byte p, whether the
-- counters have its acquisition, and where the next starts.
local function readholder(raw, p)
  local t, a, l, o, w, e, n, c, counted, nr, nk, nd, ni, q = struct.unpack(HOLDER, raw, p)
  local r, k = string.sub(raw, q, q + nr - 1), string.sub(raw, q + nr, q + nr + nk - 1)
  q = q + nr + nk
  local d, i = string.sub(raw, q, q + nd - 1), string.sub(raw, q + nd, q + nd + ni - 1)
  return {r = r, k = k, t = t, c = c, w = w, a = a, l = l, o = o, i = i, d = d, e = e, n = n}, counted == 1, q + nd + ni
end

-- decode returns a record's queue length, holders and tally (nil: none).
local function decode(raw)
  if not flat(raw) then return cmsgpack.unpack(raw) end
  local t = {struct.unpack(TALLY, raw, 2)}
  local hs, p = {}, HOLDERS
  while p <= #raw do
    local h, counted
    h, counted, p = readholder(raw, p)
    hs[#hs + 1] = h
    if not counted then t[1] = t[1] + 1 end
  end
  local pend, n = {[ACQS] = t[1], [HOLD_US] = t[2]}, t[1]
  for b = 1, #BOUNDS + 1 do
    pend[HOLD_BUCKETS + b] = t[2 + b]
    n = n + t[2 + b]
  end
  return 0, hs, n > 0 and pend or nil
end

-- encode returns the record of a lock with qlen waiters and holders hs,
-- every one counted.
local function encode(qlen, hs)
  local out = {EMPTY}
  for _, h in ipairs(hs) do
    if h.u or h.v then break end
    out[#out + 1] = flatholder(h, 1)
  end
  if qlen > 0 or #out <= #hs then return cmsgpack.pack(qlen, hs) end
  return table.concat(out)
end

-- load returns lock name with its definition and holders, or nil when no
-- definition covers it. A holder: r ref, k kind, t token, c count, w
-- weight, a acquired, l ttl, o hold, i waiter id, d node, e expires (0: no
-- lease), n renewed, v the acquired event of a grant to a waiter, u 1 while
-- that grant is unclaimed (see grant). The queue is read from the head as
-- needed (loadq): l.q the live waiters read, l.qraw the entries read, l.qlen
-- all; dead waiters read are removed (but under ro).
local function load(cx, name)
  local l = cx.locks[name]
  if l then return l end
  local def, slots = defof(cx, name)
  if not def then return nil end
  l = {cx = cx, name = name, def = def, slots = slots, h = {}, q = {}, qraw = 0, qlen = 0, dirty = false,
    sk = tagkey(cx, name, 's'), wk = tagkey(cx, name, 'w:' .. name), bk = tagkey(cx, name, 'b:' .. name)}
  local vs = redis.call('HMGET', l.sk, name, '') -- and the last id drawn (nextid)
  if not cx.last[l.sk] then cx.last[l.sk] = tonumber(vs[2] or '0') end
  if vs[1] then l.qlen, l.h, l.pend = decode(vs[1]) end
  if l.qlen == 0 then l.head0 = '' end -- else the first id loadq reads
  l.q0 = l.qlen > 0
  cx.locks[name] = l
  cx.order[#cx.order + 1] = name
  return l
end

-- dropq removes waiter id from l's list (read: its entry is before l.qraw).
local function dropq(l, id, read)
  redis.call('LREM', l.wk, 1, id)
  redis.call('HDEL', l.bk, id)
  l.qlen = l.qlen - 1
  if read then l.qraw = l.qraw - 1 end
  l.dirty = true
end

-- loadq reads l's queue until k live waiters are read, or the list ends.
local function loadq(l, k)
  local cx = l.cx
  while #l.q < k and l.qraw < l.qlen do
    local n = math.min(math.max(k - #l.q, 1), 256)
    local ids = redis.call('LRANGE', l.wk, l.qraw, l.qraw + n - 1)
    if #ids == 0 then break end
    if not l.head0 then l.head0 = ids[1] end
    local bodies = redis.call('HMGET', l.bk, unpack(ids))
    for j, id in ipairs(ids) do
      local w = bodies[j] and cmsgpack.unpack(bodies[j])
      l.qraw = l.qraw + 1
      if w and nodeAlive(cx, l.name, w.d) then
        l.q[#l.q + 1] = w
      elseif not cx.ro then
        dropq(l, id, true)
      end
    end
  end
end

-- qat returns l's i-th live waiter, or nil.
local function qat(l, i)
  if i > #l.q then loadq(l, i) end
  return l.q[i]
end

-- qall reads l's whole queue and returns it.
local function qall(l) loadq(l, math.huge); return l.q end

local function used(l)
  local n = 0
  for _, h in ipairs(l.h) do n = n + h.w end
  return n
end

local function live(h, now) return h.e == 0 or h.e > now end

local function find(l, ref, token)
  for i, h in ipairs(l.h) do
    if h.r == ref and (token == 0 or h.t == token) then return i end
  end
end

local function position(l, wid)
  for i, w in ipairs(l.q) do
    if w.i == wid then return i end
  end
  if l.qraw >= l.qlen then return nil end
  local at = redis.call('LPOS', l.wk, wid)
  if not at or at < l.qraw then return nil end
  loadq(l, #l.q + at - l.qraw + 1)
  for i = #l.q, 1, -1 do
    if l.q[i].i == wid then return i end
  end
end

-- ahead returns the slots the first p waiters of l ask of it, reading
-- from the head only until they pass limit (past it, the answer is the same).
local function ahead(l, p, limit)
  local n = 0
  for i = 1, p do
    local w = n <= limit and qat(l, i)
    if not w then break end
    n = n + need(w.w, l.slots)
  end
  return n
end

-- counters returns the tally the call adds to the counters of l's definition.
local function counters(l) return sub(sub(l.cx.stats, l.sk), l.def) end

-- event types, as store.EventType
local CREATED, ACQUIRED, RELEASED, WAITING, REFUSED, EXPIRED, RESIZED, DELETED = 1, 2, 3, 4, 5, 6, 8, 9

-- defevent adds an event of definition name with slots, no lock's use.
local function defevent(cx, typ, name, slots)
  cx.ev[#cx.ev + 1] = {typ, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(cx, name), ''}
end

-- event returns an event of l: {type, lock, slots, running, waiting, ref,
-- kind, token, weight, waited, held, holder, seq, lost}.
local function event(typ, l, ref, kind, token, weight, waited, held, holder, lost)
  local seq = 0
  if typ ~= REFUSED then seq = nextid(l.cx, l.name) end
  return {typ, l.name, l.slots, used(l), l.qlen, ref or '', kind or '', token or 0, weight or 0,
    waited or 0, held or 0, holder or '', seq, lost or ''}
end

-- drop removes holder i of l, counted as released or expired.
local function drop(l, i, expired, lost)
  local cx = l.cx
  local h = table.remove(l.h, i)
  l.dirty = true
  local c = counters(l)
  if expired then add(c, EXPIRIES, 1) end
  if lost then add(c, LOSSES, 1) end
  timed(c, HOLD_US, HOLD_BUCKETS, cx.now - h.a)
  cx.ev[#cx.ev + 1] = event(expired and EXPIRED or RELEASED, l, h.r, h.k, h.t, h.w, 0, cx.now - h.a, '', lost)
  if h.d then publish(cx, h.d, table.concat({'e', '', l.name, h.r, num(h.t), lost or ''}, '\t')) end
  return h
end

-- takeable reports whether h's lease can be taken over (at its expiry, or
-- stale after its renewal: see wakeat).
local function takeable(h, stale, now) return h.e ~= 0 and (stale > 0 and h.n + stale or h.e) <= now end

-- shown returns the holder a refusal names: the first live, else the first.
local function shown(hs, now)
  for _, h in ipairs(hs) do
    if live(h, now) then return h end
  end
  return hs[1]
end

-- free returns l's free slots, first taking over takeable leases when
-- fewer than n are free.
local function free(l, n, stale)
  local f = l.slots - used(l)
  if f >= n then return f end
  local i = 1
  while i <= #l.h do
    local h = l.h[i]
    if h.u and not nodeAlive(l.cx, l.name, h.d) then -- its waiter's node died: it goes back
      drop(l, i, true, 'granted to a waiter whose node died before it took the grant')
    elseif takeable(h, stale, l.cx.now) then
      drop(l, i, true, 'taken over after its TTL')
    else
      i = i + 1
    end
  end
  return l.slots - used(l)
end

-- wakeat returns when the first holder of l becomes takeable (0: never):
-- an unclaimed grant, when its waiter's node stops counting as alive.
local function wakeat(l, stale)
  local cx = l.cx
  local at = 0
  for _, h in ipairs(l.h) do
    local x = h.e == 0 and 0 or (stale > 0 and h.n + stale or h.e) -- as takeable
    if h.u then
      local dead = math.max(nodeUntil(cx, l.name, h.d), 1) -- no entry: at once
      if x == 0 or dead < x then x = dead end
    end
    if x ~= 0 and (at == 0 or x < at) then at = x end
  end
  return at
end

local function leasetimes(now, ttl, hold, acquired)
  if ttl <= 0 then return 0, acquired end
  local length = ttl
  if hold > 0 and hold < ttl then length = hold end
  return now + length, now - (ttl - length)
end

local function unqueue(l, wid)
  local p = position(l, wid)
  if p then
    table.remove(l.q, p)
    dropq(l, wid, true)
  end
  return p
end

-- pushq puts waiter w at the back of l's queue.
local function pushq(l, w)
  redis.call('RPUSH', l.wk, w.i)
  redis.call('HSET', l.bk, w.i, cmsgpack.pack(w))
  if l.qraw == l.qlen then
    l.q[#l.q + 1] = w
    l.qraw = l.qraw + 1
  end
  l.qlen = l.qlen + 1
  l.dirty = true
end

-- grant gives request r (a waiter: r ref, k kind, l ttl, o hold, L locks,
-- W weights, c counted, i waiter id, s since) a slot of each of its locks,
-- or its hold again, adds the acquired events to evs and returns
-- {reentered, kind, ttl, hold, {name, token, acquired, expires, weight}...}.
-- A grant handed to another caller's waiter stays unclaimed (h.u) until
-- its check, and goes back if its node stops beating first.
local function grant(cx, r, evs, handed)
  local g = {1, r.k, r.l, r.o}
  for j, name in ipairs(r.L) do
    local l = load(cx, name)
    if r.i ~= '' then unqueue(l, r.i) end
    local i = find(l, r.r, 0)
    local h
    if i then
      h = l.h[i]
      if r.c == 1 then h.c = h.c + 1; l.dirty = true end
      if r.l > 0 then
        h.e, h.n = leasetimes(cx.now, r.l, r.o, h.a)
        h.l, h.o = r.l, r.o
        l.dirty = true
      end
      if #r.L == 1 then g[2], g[3], g[4] = h.k, h.l, h.o end
    else
      g[1] = 0
      h = {r = r.r, k = r.k, t = nextid(cx, name), c = 1, w = need(r.W[j], l.slots), a = cx.now, l = r.l, o = r.o, i = r.i,
        d = r.d}
      h.e, h.n = leasetimes(cx.now, r.l, r.o, cx.now)
      l.h[#l.h + 1] = h
      l.dirty = true
      local c = counters(l)
      add(c, ACQS, 1)
      local waited = 0
      if r.s > 0 then
        waited = cx.now - r.s
        add(c, WAITED, 1)
        timed(c, WAIT_US, WAIT_BUCKETS, waited)
      end
      local e = event(ACQUIRED, l, r.r, r.k, h.t, h.w, waited, 0, '', '')
      evs[#evs + 1] = e
      if r.i ~= '' then h.v = e end -- for a check that finds the grant before its message
      if handed then h.u = 1 end
    end
    g[#g + 1] = {name, h.t, h.a, h.e, h.w}
  end
  return g
end

-- fits reports whether waiter w, at its place in every queue, can be
-- granted now (taking over takeable leases on the way).
local function fits(cx, w)
  for j, name in ipairs(w.L) do
    local l = load(cx, name)
    if not l then return false end
    if not find(l, w.r, 0) then
      local p = position(l, w.i)
      if not p then return false end
      local n = ahead(l, p - 1, math.huge) + need(w.W[j], l.slots)
      if n > free(l, n, w.x) then return false end
    end
  end
  return true
end

-- removewaiter takes waiter w out of the queues of its locks but skip.
local function removewaiter(cx, w, skip)
  for _, name in ipairs(w.L) do
    local l = name ~= skip and load(cx, name)
    if l then unqueue(l, w.i) end
  end
end

-- advance grants l's waiters that fit, from the head, and hands each its
-- grant through its node. With resized, waiters asking more than l's
-- slots are told so and leave first.
local function advance(l, resized)
  local cx = l.cx
  if resized then
    qall(l)
    local i = 1
    while i <= #l.q do
      local w = l.q[i]
      if w.w ~= -1 and w.w > l.slots and not find(l, w.r, 0) then
        removewaiter(cx, w)
        publish(cx, w.d, table.concat({'h', w.i, l.name, num(w.w), num(l.slots)}, '\t'))
      else
        i = i + 1
      end
    end
  end
  local i = 1
  local before = 0
  while qat(l, i) do
    local w = l.q[i]
    local n = before + need(w.w, l.slots)
    if n > free(l, n, w.x) then break end
    if fits(cx, w) then
      local evs = {}
      local g = grant(cx, w, evs, w.i ~= cx.me)
      if w.i == cx.me then
        cx.mine = {g, evs}
      else
        publish(cx, w.d, 'g\t' .. w.i) -- its check claims the grant
      end
    else
      before = n
      i = i + 1
    end
  end
end

-- sweep drops dead waiters from root r's queues and grants those that fit.
local function sweep(cx, r)
  for _, name in ipairs(redis.call('SMEMBERS', rootkey(cx, r, 'q'))) do
    local l = load(cx, name)
    if l then
      qall(l)
      advance(l, false)
    end
  end
end

-- save writes l's record (none when l has nobody) with put (see flush),
-- counts its tally, tells a new head and keeps the set of names queued.
local function save(l, put)
  local cx = l.cx
  if l.pend then
    merge(counters(l), l.pend)
    l.pend = nil
  end
  if #l.h == 0 and l.qlen == 0 then
    redis.call('HDEL', l.sk, l.name)
  else
    put(l.sk, l.name, encode(l.qlen, l.h))
  end
  -- A new head is told when a holder ahead of it becomes takeable.
  local head = qat(l, 1)
  if head and head.i ~= l.head0 and head.i ~= cx.me then
    publish(cx, head.d, table.concat({'c', head.i, num(wakeat(l, head.x)), num(cx.now)}, '\t'))
  end
  local queued = l.qlen > 0
  if queued ~= l.q0 then redis.call(queued and 'SADD' or 'SREM', tagkey(cx, l.name, 'q'), l.name) end
end

-- flush writes what changed, one HSET per state hash, and sends the messages.
local function flush(cx)
  local w = {}
  local function put(k, f, v)
    local t = sub(w, k)
    t[#t + 1] = f
    t[#t + 1] = v
  end
  for _, name in ipairs(cx.order) do
    local l = cx.locks[name]
    if l.dirty then save(l, put) end
  end
  for k, byk in pairs(cx.stats) do -- definition -> the tally to add to its counters
    local defs, fs = {}, {}
    for def in pairs(byk) do defs[#defs + 1], fs[#fs + 1] = def, def .. '\tc' end
    local vs = #fs > 0 and redis.call('HMGET', k, unpack(fs)) or {}
    for i, def in ipairs(defs) do
      local c = vs[i] and cmsgpack.unpack(vs[i]) or {}
      merge(c, byk[def])
      put(k, fs[i], cmsgpack.pack(c))
    end
  end
  for k, v in pairs(cx.hws) do put(k, '', num(v)) end
  for k, t in pairs(w) do -- 500 fields at a time
    for i = 1, #t, 1000 do redis.call('HSET', k, unpack(t, i, math.min(i + 999, #t))) end
  end
  for node, ms in pairs(cx.msg) do
    redis.call('PUBLISH', cx.p .. 'node:' .. node, table.concat(ms, '\n'))
  end
end

-- reply writes what changed (nothing under ro, or for a refusal) and
-- returns {status, now, events, the calling node's messages, ...}.
local function reply(cx, status, ...)
  if not cx.ro then flush(cx) end
  return {status, cx.now, cx.ev, cx.loc, ...}
end

-- state returns {name, slots, family, running, expired, leases, waiting,
-- holders, queue} (holders {ref, kind, token, count, weight, acquired,
-- renewed, expires, hold}, queue {ref, kind, since, weight, locks}), or nil.
local function state(cx, name, detail)
  if isfamily(name) then
    local v = redis.call('HGET', tagkey(cx, name, 'd'), name)
    if not v then return nil end
    return {name, tonumber(v), 1, 0, 0, 0, 0, {}, {}}
  end
  local l = load(cx, name)
  if not l then return nil end
  local running, expired = 0, 0
  local hs, qs = {}, {}
  for _, h in ipairs(l.h) do
    if live(h, cx.now) then running = running + h.w else expired = expired + h.w end
    if detail then hs[#hs + 1] = {h.r, h.k, h.t, h.c, h.w, h.a, h.n, h.e, h.o} end
  end
  qall(l)
  if detail then
    for _, w in ipairs(l.q) do qs[#qs + 1] = {w.r, w.k, w.s, w.w, w.L} end
  end
  return {name, l.slots, 0, running, expired, #l.h, #l.q, hs, qs}
end

-- doom returns definition name to delete with its locks (a family's
-- members in use), or nil (under ro: a refusal writes nothing).
local function doom(cx, name)
  local slots = redis.call('HGET', tagkey(cx, name, 'd'), name)
  if not slots then return nil end
  local x = {name = name, slots = tonumber(slots), ls = {}}
  if isfamily(name) then
    local ms = members(tagkey(cx, name, 's'))
    table.sort(ms)
    for _, m in ipairs(ms) do
      local l = load(cx, m)
      if l and l.def == name then x.ls[#x.ls + 1] = l end
    end
  else
    x.ls[1] = load(cx, name)
  end
  return x
end

-- inuse adds x's holders and waiters to t, and its first lock in use.
local function inuse(x, t)
  for _, l in ipairs(x.ls) do
    t.holders = t.holders + #l.h
    t.waiters = t.waiters + #qall(l)
    if not t.first and #l.h + #l.q > 0 then t.first = l.name end
  end
end

-- remove deletes x: its waiters leave and are told to check (finding no
-- definition), its holds end as lost, its definition and counters go. The
-- root's last token stays: a lock defined again draws tokens above its old.
local function remove(cx, x)
  for _, l in ipairs(x.ls) do
    for _, w in ipairs(l.q) do
      removewaiter(cx, w, l.name)
      publish(cx, w.d, 'c\t' .. w.i)
    end
    redis.call('DEL', l.wk, l.bk)
    l.q, l.qraw, l.qlen = {}, 0, 0
    l.pend = nil -- its definition's counters go
    local lost = 'released by another caller: lock "' .. l.name .. '" was deleted'
    while #l.h > 0 do drop(l, #l.h, false, lost) end
    l.dirty = true
    if l.name ~= x.name then defevent(cx, DELETED, l.name, l.slots) end
  end
  redis.call('HDEL', tagkey(cx, x.name, 'd'), x.name)
  cx.defs = {} -- the definitions cached may be the one deleted
  local sk = tagkey(cx, x.name, 's')
  sub(cx.stats, sk)[x.name] = nil
  redis.call('HDEL', sk, x.name .. '\tc')
  defevent(cx, DELETED, x.name, x.slots)
end

-- define sets the slots of definition name, and adds the event typ
-- (CREATED or RESIZED); a resize grants the waiters that then fit.
local function define(cx, typ, name, slots)
  redis.call('HSET', tagkey(cx, name, 'd'), name, num(slots))
  cx.defs = {}
  if isfamily(name) then
    for _, m in ipairs(typ == RESIZED and members(tagkey(cx, name, 's')) or {}) do
      local l = load(cx, m)
      if l and l.def == name then
        l.slots = slots
        advance(l, true)
      end
    end
    return defevent(cx, typ, name, slots)
  end
  local l = load(cx, name) -- a member of a family pruned before: emptied
  l.def, l.slots = name, slots
  if typ == RESIZED then advance(l, true) end
  cx.ev[#cx.ev + 1] = event(typ, l, '', '', 0, 0, 0, 0, '', '')
end
