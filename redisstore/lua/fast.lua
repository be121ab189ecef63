
-- fast.lua: the uncontended paths of acquire and release, run before
-- begin (see scripts.go): one lock, no queue, nothing to take over; and
-- the release that hands its lock to the head waiter alone. They make
-- only the calls and tables the answer needs, and return nil, having
-- written nothing, for every other case, which the general path then
-- takes from the start. The events of the caller are built only when it
-- has an Emitter (the last argument, "1"): an event's sequence number is
-- drawn only then. They read and write the holders of a record as they
-- are, arrays (see HR in lua/common.lua).

-- famof returns the patterns that may define name, after name itself:
-- false for a lock of no family, the pattern of its family for a lock of
-- one ('a/*' for 'a/b'), else the table of patterns() (not to be changed).
local famof = memo(function(name)
  local cut = string.find(name, '/', 2, true)
  if not cut or cut == #name then return false end
  if not string.find(name, '/', cut + 1, true) then return string.sub(name, 1, cut - 1) .. '/*' end
  return patterns(name)
end)

-- fastdef reads the definition covering name and the last id drawn
-- under its root (dk, its P{R}:d): def, slots, last, or nil. The last id
-- is as read (a string, or false when none was drawn): a release without
-- events does not parse it (see lastid).
local function fastdef(dk, name)
  local fam = famof(name)
  if not fam then -- a lock of no family: no table of patterns
    local vs = redis.call('HMGET', dk, '', name)
    if vs[2] then return name, tonum(vs[2]), vs[1] end
    return nil
  end
  if type(fam) == 'string' then -- one family
    local vs = redis.call('HMGET', dk, '', name, fam)
    if vs[2] then return name, tonum(vs[2]), vs[1] end
    if vs[3] then return fam, tonum(vs[3]), vs[1] end
    return nil
  end
  local ps = fam
  local vs = redis.call('HMGET', dk, '', unpack(ps))
  for i = 1, #ps do
    local v = vs[i + 1]
    if v then return ps[i], tonum(v), vs[1] end
  end
  return nil
end

-- lastid is the last id drawn of fastdef's last.
local function lastid(last) return tonumber(last or '0') end

-- fieldsof returns the counter fields of definition def (see count in
-- lua/common.lua): f[c] the field of counter c (1, 5, 6, 8), f.h[i] and
-- f.w[i] those of hold and wait bucket i.
local fieldsof = memo(function(def)
  local f = {h = {}, w = {}}
  for _, c in ipairs({1, 5, 6, 8}) do f[c] = def .. '\t' .. c end
  for i = 1, #BOUNDS + 1 do f.h[i], f.w[i] = def .. '\th' .. i, def .. '\tw' .. i end
  return f
end)

-- queued reports whether a lock record (P{R}:l:NAME) says the lock has a
-- queue, from its first byte: the queue's length is packed first, and 0
-- is the byte 0. The general path then takes an acquisition with no
-- unpacking nor reading of definitions wasted here.
local function queued(raw)
  return raw and string.byte(raw, 1) ~= 0
end

-- The holder functions of lua/common.lua (live, takeable, wakeat) on
-- holders as arrays.
local function hlive(h) return h[HE] == 0 or h[HE] > NOW end

local function htakeable(h, stale)
  if h[HE] == 0 then return false end
  if stale > 0 then return h[HN] + stale <= NOW end
  return h[HE] <= NOW
end

local function hwakeat(hs, stale)
  local at = 0
  for _, h in ipairs(hs) do
    if h[HE] ~= 0 then
      local x = h[HE]
      if stale > 0 then x = h[HN] + stale end
      if at == 0 or x < at then at = x end
    end
  end
  return at
end

-- fastacquire answers a try or a first attempt ('try', 'wait') at one
-- lock with no queue, when it grants, or when a try is refused with no
-- lease to take over. KEYS: the lock's, then its root's d, s and u (see
-- acquire.go); ARGV as acquire.lua's, then the events flag.
local function fastacquire(keys, argv)
  if argv[13] ~= '1' or argv[4] == 'check' or #keys ~= 4 then return nil end
  P, NODE = argv[1], argv[2]
  local name, w, ref = argv[14], tonum(argv[15]), argv[5]
  local raw = redis.call('GET', keys[1])
  if queued(raw) then return nil end
  local def, slots, last = fastdef(keys[2], name)
  if not def or (w ~= -1 and w > slots) then return nil end
  local qlen, hs = 0, nil
  if raw then
    qlen, hs = cmsgpack.unpack(raw)
    if qlen > 0 then return nil end
  end
  clock()
  local used = 0
  if hs then
    for _, h in ipairs(hs) do
      if h[HR] == ref then return nil end -- re-entry
      used = used + h[HW]
    end
  end
  local n = need(w, slots)
  local evon = argv[16] == '1'
  local kind = argv[6]
  if used + n > slots then
    if argv[4] ~= 'try' then return nil end
    local stale = tonum(argv[9])
    local first
    for _, h in ipairs(hs) do
      if htakeable(h, stale) or h[HU] then return nil end -- HU: the general path judges its node
      if not first and hlive(h) then first = h end
    end
    first = first or hs[1]
    local free = math.max(slots - used, 0)
    if not evon then return {'B', NOW, name, first[HK], first[HR], first[HE], 0, def, slots, free, w} end
    local ev = {{REFUSED, name, slots, used, 0, '', '', 0, w, 0, 0, first[HK], 0, ''}}
    return {'busy', NOW, ev, {}, name, first[HK], first[HR], first[HE], 0, def, slots, free, w}
  end
  local ttl, hold = tonum(argv[7]), tonum(argv[8])
  local token = lastid(last) + 1
  if token < NOW then token = NOW end
  local e, renewed = leasetimes(ttl, hold, NOW)
  local h = {ref, kind, token, 1, n, NOW, ttl, hold, '', NODE, e, renewed} -- see HR
  if hs then hs[#hs + 1] = h else hs = {h} end
  redis.call('SET', keys[1], cmsgpack.pack(0, hs))
  if #hs == 1 then redis.call('SADD', keys[4], name) end
  local top = token
  if evon then top = token + 1 end
  redis.call('HSET', keys[2], '', num(top))
  redis.call('HINCRBY', keys[3], fieldsof(def)[1], '1')
  -- Without events, a flat reply: the caller knows the rest of its grant.
  if not evon then return {'G', NOW, token, e, n} end
  local ev = {{ACQUIRED, name, slots, used + n, 0, ref, kind, token, n, 0, 0, '', top, ''}}
  return {'granted', NOW, ev, {}, {0, kind, ttl, hold, {name, token, NOW, e, n}}}
end

-- fasthandover answers fastrelease's release of hold at (of hs, the
-- holders of a lock whose queue has qlen entries) when the general path
-- would hand the freed slots to the head waiter alone: the head is live,
-- asks for this lock only, does not hold it yet and fits; the next
-- waiter, if any, is live, does not fit after it and can take no lease
-- over (no other grant is unclaimed). It makes the general path's
-- writes, events and messages (drop, advance, save and flush of
-- lua/common.lua) decoding only these two waiters' requests, and returns
-- nil, having written nothing, for every other case.
local function fasthandover(keys, argv, def, slots, last, qlen, hs, at)
  local name, tag = argv[7], string.sub(keys[2], 1, -2) -- P{R}:
  local wk, bk = tag .. 'w:' .. name, tag .. 'b:' .. name
  local ids = redis.call('LRANGE', wk, 0, 1)
  if #ids == 0 then return nil end
  local bodies = redis.call('HMGET', bk, unpack(ids))
  if not bodies[1] or (ids[2] and not bodies[2]) then return nil end
  local w = cmsgpack.unpack(bodies[1])
  if #w.L ~= 1 then return nil end
  local nx = ids[2] and cmsgpack.unpack(bodies[2])
  local up = redis.call('HMGET', tag .. 'n', w.d, nx and nx.d or w.d)
  clock()
  if tonumber(up[1] or '0') <= NOW or (nx and tonumber(up[2] or '0') <= NOW) then return nil end
  local h = table.remove(hs, at)
  local used = 0
  for _, x in ipairs(hs) do
    if x[HR] == w.r then return nil end -- a re-entry
    used = used + x[HW]
  end
  local n = need(w.w, slots)
  if used + n > slots then return nil end
  local evon = argv[9] == '1'
  local seq, rseq = lastid(last), 0
  if evon then
    rseq = seq + 1
    if rseq < NOW then rseq = NOW end
    seq = rseq
  end
  local token = seq + 1
  if token < NOW then token = NOW end
  local aseq = token + 1
  local e, renewed = leasetimes(w.l, w.o, NOW)
  local waited = 0
  if w.s > 0 then waited = NOW - w.s end
  local ev = {ACQUIRED, name, slots, used + n, qlen - 1, w.r, w.k, token, n, waited, 0, '', aseq, ''}
  hs[#hs + 1] = {w.r, w.k, token, 1, n, NOW, w.l, w.o, w.i, w.d, e, renewed, ev, 1} -- see HR; unclaimed
  if nx then
    if used + n + need(nx.w, slots) <= slots then return nil end
    for i, x in ipairs(hs) do
      if htakeable(x, nx.x) or (x[HU] and i < #hs) then return nil end
    end
  end
  redis.call('LPOP', wk)
  redis.call('HDEL', bk, w.i)
  redis.call('SET', keys[1], cmsgpack.pack(qlen - 1, hs))
  if qlen == 1 then redis.call('SREM', tag .. 'q', name) end
  local sk, f = keys[3], fieldsof(def)
  local held = NOW - h[HA]
  if held < 0 then held = 0 end
  redis.call('HINCRBY', sk, f[8], num(held))
  redis.call('HINCRBY', sk, f.h[bucket(held)], '1')
  redis.call('HINCRBY', sk, f[1], '1')
  if w.s > 0 then
    local wt = waited
    if wt < 0 then wt = 0 end
    redis.call('HINCRBY', sk, f[5], '1')
    redis.call('HINCRBY', sk, f[6], num(wt))
    redis.call('HINCRBY', sk, f.w[bucket(wt)], '1')
  end
  redis.call('HSET', keys[2], '', num(aseq))
  MSG, LOCAL = {}, {}
  publish(NODE, table.concat({'e', '', name, h[HR], argv[8], ''}, '\t'))
  publish(w.d, grantmsg(w.i))
  if nx then
    -- The next waiter wakes when a lease ahead of it becomes takeable, or
    -- when the grant just made does, unclaimed, with its waiter's node.
    local wake, dead = hwakeat(hs, nx.x), tonumber(up[1])
    if wake == 0 or dead < wake then wake = dead end
    publish(nx.d, table.concat({'c', nx.i, num(wake), num(NOW)}, '\t'))
  end
  for node, ms in pairs(MSG) do
    redis.call('PUBLISH', P .. 'node:' .. node, table.concat(ms, '\n'))
  end
  if not evon then
    if #LOCAL == 1 then return {'R', NOW} end -- the caller ends its watchers, as 'e' would
    return {'ok', NOW, {}, LOCAL, {}}
  end
  return {'ok', NOW, {{RELEASED, name, slots, used, qlen, h[HR], h[HK], h[HT], h[HW], 0, NOW - h[HA], '', rseq, ''}}, LOCAL,
    {}}
end

-- fastrelease answers the release of one hold, counted once, of this
-- node, by its token, of a lock with no queue, or with one that
-- fasthandover answers. KEYS as fastacquire's;
-- ARGV as release.lua's, then the events flag.
local function fastrelease(keys, argv)
  if argv[4] ~= 'release' or argv[6] ~= '1' or #keys ~= 4 then return nil end
  local name, token = argv[7], tonumber(argv[8])
  if token == 0 then return nil end
  P, NODE = argv[1], argv[2]
  local raw = redis.call('GET', keys[1])
  if not raw then return nil end
  local def, slots, last = fastdef(keys[2], name)
  if not def then return nil end
  local qlen, hs = cmsgpack.unpack(raw)
  local ref, at = argv[3], nil
  for i, h in ipairs(hs) do
    if h[HR] == ref and h[HT] == token then at = i; break end
  end
  if not at then return nil end
  local h = hs[at]
  if h[HC] > 1 or h[HD] ~= NODE then return nil end
  if qlen > 0 then return fasthandover(keys, argv, def, slots, last, qlen, hs, at) end
  clock()
  table.remove(hs, at)
  if #hs == 0 then
    redis.call('DEL', keys[1])
    redis.call('SREM', keys[4], name)
  else
    redis.call('SET', keys[1], cmsgpack.pack(0, hs))
  end
  local held = NOW - h[HA]
  if held < 0 then held = 0 end
  local sk, f = keys[3], fieldsof(def)
  redis.call('HINCRBY', sk, f[8], num(held))
  redis.call('HINCRBY', sk, f.h[bucket(held)], '1')
  -- Without events, a flat reply: the caller ends its own watchers of
  -- the hold, as the message 'e' would.
  if argv[9] ~= '1' then return {'R', NOW} end
  local used = 0
  for _, x in ipairs(hs) do used = used + x[HW] end
  local seq = lastid(last) + 1
  if seq < NOW then seq = NOW end
  redis.call('HSET', keys[2], '', num(seq))
  local ev = {{RELEASED, name, slots, used, 0, h[HR], h[HK], h[HT], h[HW], 0, NOW - h[HA], '', seq, ''}}
  return {'ok', NOW, ev, {table.concat({'e', '', name, h[HR], argv[8], ''}, '\t')}, {}}
end
