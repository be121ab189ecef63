-- acquire: a try ('try'), a first attempt that queues when refused
-- ('wait'), or a queued waiter's check ('check'). ARGV: prefix, node,
-- waiter id, mode, ref, kind, ttl µs, hold µs, staleAfter µs, counted,
-- reenterAll, waiter TTL µs, n, n names, n weights, events wanted (fast.lua).
local node, wid, mode = ARGV[2], ARGV[3], ARGV[4]
local r = {r = ARGV[5], k = ARGV[6], l = tonumber(ARGV[7]), o = tonumber(ARGV[8]), x = tonumber(ARGV[9]),
  c = tonumber(ARGV[10]), i = '', s = 0, d = node, L = {}, W = {}}
local reenterAll, wttl = ARGV[11] == '1', tonumber(ARGV[12])
local n = tonumber(ARGV[13])
for j = 1, n do
  r.L[j] = ARGV[13 + j]
  r.W[j] = tonumber(ARGV[13 + n + j])
end
ME = wid

local ls = {}
for j, name in ipairs(r.L) do
  local l = load(name)
  if not l then return readreply('notfound', name) end
  ls[j] = l
end

-- busy refuses the request at lock l, naming holder h (or the queue).
-- A refusal about slots (no h given) says the lock's slots and how many
-- are free (BusyError.Slots, Free); a ReenterAll refusal says 0, 0.
local function busy(l, w, h)
  local queued, slots, nfree = 0, 0, 0
  if not h then
    slots, nfree = l.slots, math.max(l.slots - used(l), 0)
    if used(l) < l.slots and l.qlen > 0 then
      queued = 1
    elseif #l.h > 0 then
      h = l.h[1]
      for _, x in ipairs(l.h) do
        if live(x) then h = x; break end
      end
    end
  end
  local kind, ref, exp = '', '', 0
  if h then kind, ref, exp = h.k, h.r, h.e end
  EV[#EV + 1] = event(REFUSED, l, '', '', 0, w, 0, 0, kind, '')
  return reply('busy', l.name, kind, ref, exp, queued, l.def, slots, nfree, w)
end

local function heavy(resized)
  for j, l in ipairs(ls) do
    local w = r.W[j]
    if w ~= -1 and w > l.slots and not find(l, r.r, 0) then
      if resized == 1 then removewaiter({L = r.L, i = wid}) end
      return l.name, w, l.slots
    end
  end
  return nil
end

-- queued answers a waiter still in the queue: when it is at the head of a
-- lock, the time (µs) when a holder of it becomes takeable.
local function queued()
  local wake = 0
  for _, l in ipairs(ls) do
    local head = qat(l, 1)
    if head and head.i == r.i then
      local at = wakeat(l, r.x)
      if at > 0 and (wake == 0 or at < wake) then wake = at end
    end
  end
  return reply('queued', wake)
end

-- enqueue puts the request at the back of every queue.
local function enqueue()
  r.i, r.s = wid, NOW
  local k = tagkey(r.L[1], 'n')
  for j, l in ipairs(ls) do
    k = tagkey(l.name, 'n')
    redis.call('HSET', k, node, num(NOW + wttl))
    alive[k] = nil
    pushq(l, {i = wid, d = node, r = r.r, k = r.k, s = NOW, w = r.W[j], L = r.L, W = r.W,
      l = r.l, o = r.o, x = r.x, c = r.c})
    EV[#EV + 1] = event(WAITING, l, r.r, r.k, 0, r.W[j], 0, 0, '', '')
  end
end

-- claim answers a check: the grant handed to the waiter, now claimed (its
-- holds no longer go back when its node stops beating, and no longer
-- carry their acquired events), or nil. A lock
-- the ref held already counts as granted (a re-entry keeps its hold). A
-- grant of several locks part of which went back (its node was taken for
-- dead) goes back whole: the waiter queues again.
local function claim()
  local g, evs, mine, handed = {0, r.k, r.l, r.o}, {}, {}, 0
  for _, l in ipairs(ls) do
    local x
    for _, h in ipairs(l.h) do
      if h.i == wid then x = h end
    end
    if x then handed = handed + 1 else x = l.h[find(l, r.r, 0) or 0] end
    if x then
      g[#g + 1] = {l.name, x.t, x.a, x.e, x.w}
      if x.i == wid and x.v then evs[#evs + 1] = x.v end
      mine[#mine + 1] = {l, x}
    end
  end
  if handed == 0 then return nil end
  for _, y in ipairs(mine) do
    local l, h = y[1], y[2]
    if #mine < #ls then
      if h.i == wid then drop(l, find(l, h.r, h.t), false, nil) end
    elseif h.i == wid and (h.u or h.v) then
      h.u, h.v, l.dirty = nil, nil, true -- claimed; its event is the caller's now
    end
  end
  if #mine < #ls then return nil end
  for _, e in ipairs(evs) do EV[#EV + 1] = e end
  return g
end

if mode == 'check' then
  -- Handed over already?
  local g = claim()
  if g then return reply('granted', g) end
  local p = position(ls[1], wid)
  if p then
    r.i, r.s = wid, ls[1].q[p].s
  else
    enqueue() -- taken for dead meanwhile: back of the queue
  end
  local name, w, slots = heavy(1)
  if name then return reply('heavy', name, w, slots, 1) end
  for _, l in ipairs(ls) do
    advance(l, false)
    if MINE then break end
  end
  if MINE then
    for _, e in ipairs(MINE[2]) do EV[#EV + 1] = e end
    return reply('granted', MINE[1])
  end
  return queued()
end

if reenterAll then
  local first, held = nil, 0
  for _, l in ipairs(ls) do
    local i = find(l, r.r, 0)
    if i then
      held = held + 1
      if not first then first = {l, l.h[i]} end
    end
  end
  if held > 0 and held < #ls then return busy(first[1], r.W[1], first[2]) end
end
local name, w, slots = heavy(0)
if name then return readreply('heavy', name, w, slots, 0) end
for _, l in ipairs(ls) do advance(l, false) end
local ok = true
for j, l in ipairs(ls) do
  if not find(l, r.r, 0) then
    local n = need(r.W[j], l.slots)
    local want = aheadover(l, l.slots - n) + n
    if want > free(l, want, r.x) then
      ok = false
      if mode == 'try' then return busy(l, r.W[j], nil) end
    end
  end
end
if ok then return reply('granted', grant(r, EV)) end
enqueue()
return queued()
