-- fast.lua: the uncontended acquire and release of one lock, and the
-- claim of a grant handed over (acquire.lua's check claims with it too),
-- run before begin (see scripts.go). They make only the calls the
-- guarantees need and write no counter (what they count stays in the
-- record's tally); in every other case they return nil, having written
-- nothing, and the general path runs. KEYS: P{R}:s, P{R}:d.

-- claim returns the grant handed to waiter cx.me of request r (see
-- grant), claimed, or nil: the one hand-over path, of acquire.lua's check
-- and of fastacquire's. A lock the ref held already counts as granted; a
-- grant part of which went back (its node was taken for dead) goes back
-- whole: the waiter queues again.
local function claim(cx, r)
  local wid, ls = cx.me, r.ls
  local g, handed = {0, r.k, r.l, r.o}, 0
  for j = 1, #ls do -- numeric loops: ipairs is a C call an item
    local l, x = ls[j], nil
    for i = 1, #l.h do
      if l.h[i].i == wid then x = l.h[i] end
    end
    if x then handed = handed + 1 else x = l.h[find(l, r.r, 0) or 0] end
    if x then g[#g + 1] = {l.name, x.t, x.a, x.e, x.w} end
  end
  if handed == 0 then return nil end
  local whole = #g - 4 == #ls
  for j = 1, #ls do
    local l = ls[j]
    for i = 1, #l.h do
      local h = l.h[i]
      if h.i ~= wid then -- not the grant (or a lock the ref held already)
      elseif not whole then
        drop(l, i, false, nil)
        break
      elseif h.u or h.v then -- claimed; its event is the caller's now
        if h.v then cx.ev[#cx.ev + 1] = h.v end
        h.u, h.v, l.dirty = nil, nil, true
      end
    end
  end
  if whole then return g end
end

-- fastclaim answers a waiter's check at one lock whose record holds the
-- grant handed to it (claim on the record alone: no definition, no save).
local function fastclaim(keys, argv)
  local name = argv[14]
  local raw = redis.call('HGET', keys[1], name)
  if not raw then return nil end
  local qlen, hs = decode(raw)
  local l, cx = {name = name, h = hs, dirty = false}, {me = argv[3], ev = {}}
  local g = claim(cx, {r = argv[5], k = argv[6], l = tonum(argv[7]), o = tonum(argv[8]), ls = {l}})
  if not g then return nil end
  if l.dirty then redis.call('HSET', keys[1], name, encode(qlen, hs)) end
  return {'granted', servertime(), cx.ev, {}, g}
end

-- fastacquire answers a grant at a lock with no queue, or a try refused
-- with no lease to take over, when its record is flat (see encode): the
-- grant appends its holder, uncounted, and leaves the rest as it was.
-- ARGV as acquire.lua's. A grant answers its token alone when it is the
-- server's clock and the caller knows the weight, else {'G', now, token,
-- expires, weight}.
local function fastacquire(keys, argv)
  if argv[13] ~= '1' or #keys ~= 2 then return nil end
  if argv[4] == 'check' then return fastclaim(keys, argv) end
  if argv[16] ~= '0' then return nil end
  local name, w, ref = argv[14], tonum(argv[15]), argv[5]
  local def, slots = definition(keys[2], name)
  if not def or (w ~= -1 and w > slots) then return nil end
  local vs = redis.call('HMGET', keys[1], name, '')
  local raw = vs[1] or EMPTY
  if not flat(raw) then return nil end
  local now = servertime()
  local hs, used, p = {}, 0, HOLDERS
  while p <= #raw do
    local h, _
    h, _, p = readholder(raw, p)
    if h.r == ref then return nil end -- re-entry
    used = used + h.w
    hs[#hs + 1] = h
  end
  local n = need(w, slots)
  if used + n > slots then
    if argv[4] ~= 'try' then return nil end
    for _, h in ipairs(hs) do -- a lease to take over: the general path
      if takeable(h, tonum(argv[9]), now) then return nil end
    end
    local h = shown(hs, now)
    return {'B', now, h.k, h.r, h.e, def, slots, math.max(slots - used, 0)}
  end
  local ttl, hold = tonum(argv[7]), tonum(argv[8])
  local token = tonumber(vs[2] or '0') + 1
  if token < now then token = now end
  local e, renewed = leasetimes(now, ttl, hold, now)
  local h = {r = ref, k = argv[6], t = token, c = 1, w = n, a = now, l = ttl, o = hold, i = '', d = argv[2], e = e, n = renewed}
  redis.call('HSET', keys[1], name, raw .. flatholder(h, 0), '', token) -- %.17g: exact
  if token == now and w ~= -1 then return token end
  return {'G', now, token, e, n}
end

-- fastrelease answers 1 to the release of one hold (counted once, of this
-- node, by its token) of a lock whose record is flat, adding the hold to
-- the record's tally. ARGV as release.lua's, then the caller's reckoning
-- of the server's clock (µs), which times the hold.
local function fastrelease(keys, argv)
  if argv[4] ~= 'release' or argv[6] ~= '1' or argv[9] ~= '0' or #keys ~= 2 then return nil end
  local name, token = argv[7], tonumber(argv[8])
  local raw = redis.call('HGET', keys[1], name)
  if not raw or token == 0 or not flat(raw) then return nil end
  local ref, p = argv[3], HOLDERS
  while p <= #raw do
    local t, a, _, _, _, _, _, c, counted, nr, nk, nd, ni, r = struct.unpack(HOLDER, raw, p) -- see readholder
    local q = r + nr + nk + nd + ni
    if t == token and string.sub(raw, r, r + nr - 1) == ref then
      if c > 1 or string.sub(raw, r + nr + nk, r + nr + nk + nd - 1) ~= argv[2] then return nil end
      -- the tally's acquisitions, hold µs and the hold's bucket b, in place
      local d = math.max(tonumber(argv[10]) - a, 0)
      local b = bucket(d)
      local acqs, us = struct.unpack('<i8i8', raw, 2)
      if counted == 0 then acqs = acqs + 1 end
      local at = 10 + 8 * b -- bucket b's byte
      redis.call('HSET', keys[1], name, FLAT .. struct.pack('<i8i8', acqs, us + d) .. string.sub(raw, 18, at - 1) ..
        struct.pack('<i8', struct.unpack('<i8', raw, at) + 1) .. string.sub(raw, at + 8, p - 1) .. string.sub(raw, q))
      return 1
    end
    p = q
  end
  return nil
end
