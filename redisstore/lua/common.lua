-- common.lua: the definitions every function of redisstore's library
-- shares (see scripts.go). Each function begins with begin(ARGV): ARGV[1]
-- is the key prefix, ARGV[2] the calling node; the clock is the server's
-- (TIME), read once per call.
--
-- Keys of one root R (a name up to its first "/", so that a lock and the
-- families that cover it share it) all carry the hash tag {R}:
--   P{R}:d  hash  definition name -> slots; field "" the last token/seq drawn
--   P{R}:l:NAME   string (msgpack) the holders and queue of lock NAME
--   P{R}:u  set   names with a record (P{R}:l:NAME)
--   P{R}:q  set   names with waiters
--   P{R}:s  hash  definition name -> counters (msgpack)
--   P{R}:n  hash  node -> µs until which its waiters count as alive

-- The state of one call, reset by begin.
local P, NODE, NOW
local defs, hws, alive, locks, order, stats
local EV      -- events for the caller: arrays (see events.go)
local MSG     -- node -> list of messages
local ME      -- the calling waiter's id, if any (no message to itself)
local MINE    -- the calling waiter's grant, when advance made it
local LOCAL   -- messages for the calling node, in the reply

local function begin(argv)
  P, NODE = argv[1], argv[2]
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000000 + tonumber(t[2])
  defs, hws, alive, locks, order, stats = {}, {}, {}, {}, {}, {}
  EV, MSG, ME, MINE, LOCAL = {}, {}, '', nil, {}
end

local function num(x) return string.format('%.0f', x) end

local function root(name)
  local i = string.find(name, '/', 2, true)
  local r = name
  if i then r = string.sub(name, 1, i - 1) end
  if string.find(r, '[{}]') then
    r = (string.gsub(r, '.', function(c) return string.format('%02x', string.byte(c)) end))
  end
  return r
end

local function tagkey(name, s) return P .. '{' .. root(name) .. '}:' .. s end
local function lockkey(name) return P .. '{' .. root(name) .. '}:l:' .. name end

-- patterns: the name, then the families that cover it, most specific first.
local function patterns(name)
  local out = {name}
  for i = #name - 1, 2, -1 do
    if string.sub(name, i, i) == '/' then out[#out + 1] = string.sub(name, 1, i - 1) .. '/*' end
  end
  return out
end

local function isfamily(name) return #name > 2 and string.sub(name, -2) == '/*' end

-- defof returns the definition covering name and its slots, or nil.
local function defof(name)
  local d = defs[name]
  if d then return d[1], d[2] end
  local k = tagkey(name, 'd')
  for _, p in ipairs(patterns(name)) do
    local v = redis.call('HGET', k, p)
    if v then
      defs[name] = {p, tonumber(v)}
      return p, tonumber(v)
    end
  end
  return nil
end

-- The last token or sequence number drawn under a root: both are the
-- server's clock in µs, raised past the last one drawn.
local function nextid(name)
  local k = tagkey(name, 'd')
  local v = hws[k]
  if not v then v = tonumber(redis.call('HGET', k, '') or '0') end
  if v + 1 > NOW then v = v + 1 else v = NOW end
  hws[k] = v
  return v
end

-- Node liveness, cached per script.
local function nodeAlive(name, node)
  local k = tagkey(name, 'n')
  local c = alive[k]
  if not c then c = {}; alive[k] = c end
  local v = c[node]
  if v == nil then
    v = tonumber(redis.call('HGET', k, node) or '0')
    c[node] = v
  end
  return v > NOW
end

local function need(w, slots)
  if w == -1 then return slots end
  if w == 0 then return 1 end
  return w
end



local function publish(node, m)
  if node == NODE then
    LOCAL[#LOCAL + 1] = m
    return
  end
  local l = MSG[node]
  if not l then l = {}; MSG[node] = l end
  l[#l + 1] = m
end


-- load returns the lock name with its definition, holders and live
-- waiters, or nil when no definition covers it.
local function load(name)
  local l = locks[name]
  if l then return l end
  local def, slots = defof(name)
  if not def then return nil end
  l = {name = name, def = def, slots = slots, h = {}, q = {}, dirty = false}
  local raw = redis.call('GET', lockkey(name))
  if raw then
    local o = cmsgpack.unpack(raw)
    l.h, l.q = o.h or {}, o.q or {}
  end
  l.head0 = l.q[1] and l.q[1].i or ''
  local q = {}
  for _, w in ipairs(l.q) do
    if nodeAlive(name, w.d) then q[#q + 1] = w else l.dirty = true end
  end
  l.q = q
  locks[name] = l
  order[#order + 1] = name
  return l
end

local function used(l)
  local n = 0
  for _, h in ipairs(l.h) do n = n + h.w end
  return n
end

local function live(h) return h.e == 0 or h.e > NOW end

local function find(l, ref, token)
  for i, h in ipairs(l.h) do
    if h.r == ref and (token == 0 or h.t == token) then return i end
  end
  return nil
end

local function position(l, wid)
  for i, w in ipairs(l.q) do
    if w.i == wid then return i end
  end
  return nil
end

-- ahead returns the slots the first p waiters of l ask of it.
local function ahead(l, p)
  local n = 0
  for i = 1, p do n = n + need(l.q[i].w, l.slots) end
  return n
end

-- Counters of definitions, flushed at the end.
local function stat(l)
  local k = tagkey(l.name, 's')
  local byk = stats[k]
  if not byk then byk = {}; stats[k] = byk end
  local s = byk[l.def]
  if not s then
    local raw = redis.call('HGET', k, l.def)
    if raw then s = cmsgpack.unpack(raw) else s = {0, 0, 0, 0, 0, 0, 0, 0, {}, {}} end
    byk[l.def] = s
  end
  return s
end

local BOUNDS = {1000, 4000, 16000, 64000, 256000, 1024000, 4096000, 16384000, 65536000, 262144000, 1048576000}
local function bucket(d)
  for i, b in ipairs(BOUNDS) do
    if d <= b then return i end
  end
  return #BOUNDS + 1
end

-- counters: 1 acquisitions, 2 releases, 3 expiries, 4 losses, 5 waited,
-- 6 wait µs, 7 holds, 8 hold µs, 9 wait buckets, 10 hold buckets.
local function granted(l, since)
  local s = stat(l)
  s[1] = s[1] + 1
  if since > 0 then
    local w = NOW - since
    if w < 0 then w = 0 end
    s[5] = s[5] + 1
    s[6] = s[6] + w
    local b = bucket(w)
    s[9][b] = (s[9][b] or 0) + 1
  end
end

local function ended(l, h, expired, lost)
  local s = stat(l)
  if expired then s[3] = s[3] + 1 else s[2] = s[2] + 1 end
  if lost then s[4] = s[4] + 1 end
  local held = NOW - h.a
  if held < 0 then held = 0 end
  s[7] = s[7] + 1
  s[8] = s[8] + held
  local b = bucket(held)
  s[10][b] = (s[10][b] or 0) + 1
end

-- event types, as store.EventType
local CREATED, ACQUIRED, RELEASED, WAITING, REFUSED, EXPIRED, RESIZED = 1, 2, 3, 4, 5, 6, 8

-- event returns an event of l: {type, lock, slots, running, waiting, ref,
-- kind, token, weight, waited, held, holder, seq, lost}.
local function event(typ, l, ref, kind, token, weight, waited, held, holder, lost)
  local seq = 0
  if typ ~= REFUSED then seq = nextid(l.name) end
  return {typ, l.name, l.slots, used(l), #l.q, ref or '', kind or '', token or 0, weight or 0,
    waited or 0, held or 0, holder or '', seq, lost or ''}
end

-- drop removes holder i of l, counted as released or expired.
local function drop(l, i, expired, lost)
  local h = table.remove(l.h, i)
  l.dirty = true
  ended(l, h, expired, lost ~= nil)
  local typ = RELEASED
  if expired then typ = EXPIRED end
  EV[#EV + 1] = event(typ, l, h.r, h.k, h.t, h.w, 0, NOW - h.a, '', lost)
  if h.d then publish(h.d, table.concat({'e', '', l.name, h.r, num(h.t), lost or ''}, '\t')) end
  return h
end

local function takeable(h, stale)
  if h.e == 0 then return false end
  if stale > 0 then return h.n + stale <= NOW end
  return h.e <= NOW
end

-- free returns l's free slots, first taking over takeable leases when
-- fewer than n are free.
local function free(l, n, stale)
  local f = l.slots - used(l)
  if f >= n then return f end
  local i = 1
  while i <= #l.h do
    if takeable(l.h[i], stale) then drop(l, i, true, 'taken over after its TTL') else i = i + 1 end
  end
  return l.slots - used(l)
end

-- wakeat returns when the first holder of l becomes takeable (0: never).
local function wakeat(l, stale)
  local at = 0
  for _, h in ipairs(l.h) do
    if h.e ~= 0 then
      local x = h.e
      if stale > 0 then x = h.n + stale end
      if at == 0 or x < at then at = x end
    end
  end
  return at
end

local function leasetimes(ttl, hold, acquired)
  if ttl <= 0 then return 0, acquired end
  local length = ttl
  if hold > 0 and hold < ttl then length = hold end
  return NOW + length, NOW - (ttl - length)
end

local function unqueue(l, wid)
  local p = position(l, wid)
  if p then
    table.remove(l.q, p)
    l.dirty = true
  end
  return p
end

-- grant gives request r (fields of a waiter: r ref, k kind, l ttl, o hold,
-- L locks, W weights, c counted, i waiter id, s since) a slot of each of
-- its locks, its existing hold where it has one. It returns the grant:
-- {reentered, kind, ttl, hold, {name, token, acquired, expires, weight}...}
-- and adds the acquired events to evs.
local function grant(r, evs)
  local g = {1, r.k, r.l, r.o}
  for j, name in ipairs(r.L) do
    local l = load(name)
    if r.i ~= '' then unqueue(l, r.i) end
    local i = find(l, r.r, 0)
    local h
    if i then
      h = l.h[i]
      if r.c == 1 then h.c = h.c + 1; l.dirty = true end
      if r.l > 0 then
        h.e, h.n = leasetimes(r.l, r.o, h.a)
        h.l, h.o = r.l, r.o
        l.dirty = true
      end
      if #r.L == 1 then g[2], g[3], g[4] = h.k, h.l, h.o end
    else
      g[1] = 0
      h = {r = r.r, k = r.k, t = nextid(name), c = 1, w = need(r.W[j], l.slots), a = NOW, l = r.l, o = r.o, i = r.i,
        d = r.d}
      h.e, h.n = leasetimes(r.l, r.o, NOW)
      l.h[#l.h + 1] = h
      l.dirty = true
      granted(l, r.s)
      local waited = 0
      if r.s > 0 then waited = NOW - r.s end
      local e = event(ACQUIRED, l, r.r, r.k, h.t, h.w, waited, 0, '', '')
      evs[#evs + 1] = e
      if r.i ~= '' then h.v = e end -- for a check that finds the grant before its message
    end
    g[#g + 1] = {name, h.t, h.a, h.e, h.w}
  end
  return g
end

-- fits reports whether waiter w, at its place in every queue, can be
-- granted now (taking over takeable leases on the way).
local function fits(w)
  for j, name in ipairs(w.L) do
    local l = load(name)
    if not l then return false end
    if not find(l, w.r, 0) then
      local p = position(l, w.i)
      if not p then return false end
      local n = ahead(l, p - 1) + need(w.W[j], l.slots)
      if n > free(l, n, w.x) then return false end
    end
  end
  return true
end

local function enc(v)
  if type(v) == 'number' then return num(v) end
  return v
end

-- grantmsg is the message that hands a grant to its waiter's node: "g",
-- the waiter, the grant and its events, tab-separated.
local function grantmsg(wid, g, evs)
  local f = {'g', wid, num(g[1]), g[2], num(g[3]), num(g[4]), num(#g - 4)}
  for i = 5, #g do
    for _, v in ipairs(g[i]) do f[#f + 1] = enc(v) end
  end
  f[#f + 1] = num(#evs)
  for _, e in ipairs(evs) do
    for _, v in ipairs(e) do f[#f + 1] = enc(v) end
  end
  return table.concat(f, '\t')
end

-- removewaiter takes waiter w out of every queue it is in.
local function removewaiter(w)
  for _, name in ipairs(w.L) do
    local l = load(name)
    if l then unqueue(l, w.i) end
  end
end

-- advance grants l's waiters that fit, from the head, and hands each its
-- grant through its node. With resized, waiters asking more than l's
-- slots are told so and leave first.
local function advance(l, resized)
  if resized then
    local i = 1
    while i <= #l.q do
      local w = l.q[i]
      if w.w ~= -1 and w.w > l.slots and not find(l, w.r, 0) then
        removewaiter(w)
        publish(w.d, table.concat({'h', w.i, l.name, num(w.w), num(l.slots)}, '\t'))
      else
        i = i + 1
      end
    end
  end
  local i = 1
  local before = 0
  while i <= #l.q do
    local w = l.q[i]
    local n = before + need(w.w, l.slots)
    if n > free(l, n, w.x) then break end
    if fits(w) then
      local evs = {}
      local g = grant(w, evs)
      if w.i == ME then
        MINE = {g, evs}
      else
        publish(w.d, grantmsg(w.i, g, evs))
      end
    else
      before = n
      i = i + 1
    end
  end
end

-- save writes l back (or deletes its record when it has nobody).
local function save(l)
  local key = lockkey(l.name)
  if #l.h == 0 and #l.q == 0 then
    redis.call('DEL', key)
    redis.call('SREM', tagkey(l.name, 'u'), l.name)
  else
    redis.call('SET', key, cmsgpack.pack({h = l.h, q = l.q}))
    redis.call('SADD', tagkey(l.name, 'u'), l.name)
  end
  if #l.q > 0 then
    redis.call('SADD', tagkey(l.name, 'q'), l.name)
    local head = l.q[1]
    if head.i ~= l.head0 and head.i ~= ME then publish(head.d, 'c\t' .. head.i) end
  else
    redis.call('SREM', tagkey(l.name, 'q'), l.name)
  end
end

-- flush writes what changed and sends the messages.
local function flush()
  for _, name in ipairs(order) do
    local l = locks[name]
    if l.dirty then save(l) end
  end
  for k, byk in pairs(stats) do
    for def, s in pairs(byk) do redis.call('HSET', k, def, cmsgpack.pack(s)) end
  end
  for k, v in pairs(hws) do redis.call('HSET', k, '', num(v)) end
  for node, ms in pairs(MSG) do
    redis.call('PUBLISH', P .. 'node:' .. node, table.concat(ms, '\n'))
  end
end

-- reply writes what changed (nothing, for a refused try) and returns
-- {status, now, events, ...}.
local function reply(status, ...)
  flush()
  return {status, NOW, EV, LOCAL, ...}
end

-- readreply returns the answer of a script that writes nothing.
local function readreply(status, ...)
  return {status, NOW, EV, LOCAL, ...}
end

local function rootkey(r, s) return P .. '{' .. r .. '}:' .. s end

-- state returns the state of name: {name, slots, family, running,
-- expired, leases, waiting, holders, queue}, or nil when no definition
-- covers it. Holders: {ref, kind, token, count, weight, acquired, renewed,
-- expires}; queue: {ref, kind, since, weight, {locks}}.
local function state(name, detail)
  if isfamily(name) then
    local v = redis.call('HGET', tagkey(name, 'd'), name)
    if not v then return nil end
    return {name, tonumber(v), 1, 0, 0, 0, 0, {}, {}}
  end
  local l = load(name)
  if not l then return nil end
  local running, expired = 0, 0
  local hs, qs = {}, {}
  for _, h in ipairs(l.h) do
    if live(h) then running = running + h.w else expired = expired + h.w end
    if detail then hs[#hs + 1] = {h.r, h.k, h.t, h.c, h.w, h.a, h.n, h.e} end
  end
  if detail then
    for _, w in ipairs(l.q) do qs[#qs + 1] = {w.r, w.k, w.s, w.w, w.L} end
  end
  return {name, l.slots, 0, running, expired, #l.h, #l.q, hs, qs}
end
