-- acquire: a try ('try'), a first attempt that queues when refused
-- ('wait'), or a queued waiter's check ('check'). ARGV: prefix, node,
-- waiter id, mode, ref, kind, ttl µs, hold µs, staleAfter µs, counted,
-- reenterAll, waiter TTL µs, n, n names, n weights, events wanted (fast.lua).

-- request returns ARGV's request (see grant) with its locks (ls), or nil
-- and the name of one not defined.
local function request(cx, argv)
  local r = {r = argv[5], k = argv[6], l = tonumber(argv[7]), o = tonumber(argv[8]), x = tonumber(argv[9]),
    c = tonumber(argv[10]), i = '', s = 0, d = cx.node, L = {}, W = {}, ls = {}, mode = argv[4],
    all = argv[11] == '1', wttl = tonumber(argv[12])}
  local n = tonumber(argv[13])
  for j = 1, n do
    r.L[j], r.W[j] = argv[13 + j], tonumber(argv[13 + n + j])
    r.ls[j] = load(cx, r.L[j])
    if not r.ls[j] then return nil, r.L[j] end
  end
  return r
end

-- busy refuses the request at lock l, naming holder h (or the queue).
-- A refusal about slots (no h given) says the lock's slots and how many
-- are free (BusyError.Slots, Free); a ReenterAll refusal says 0, 0.
local function busy(cx, l, w, h)
  local queued, slots, nfree = 0, 0, 0
  if not h then
    slots, nfree = l.slots, math.max(l.slots - used(l), 0)
    if used(l) < l.slots and l.qlen > 0 then
      queued = 1
    else
      h = shown(l.h, cx.now)
    end
  end
  local kind, ref, exp = '', '', 0
  if h then kind, ref, exp = h.k, h.r, h.e end
  cx.ev[#cx.ev + 1] = event(REFUSED, l, '', '', 0, w, 0, 0, kind, '')
  return reply(cx, 'busy', l.name, kind, ref, exp, queued, l.def, slots, nfree, w)
end

-- heavy returns the first lock r asks more slots of than it has, the
-- weight and the slots (a waiter that checks leaves the queues).
local function heavy(cx, r, checking)
  for j, l in ipairs(r.ls) do
    local w = r.W[j]
    if w ~= -1 and w > l.slots and not find(l, r.r, 0) then
      if checking then removewaiter(cx, {L = r.L, i = cx.me}) end
      return l.name, w, l.slots
    end
  end
end

-- queued answers a waiter still in the queue: when it is at the head of a
-- lock, the time (µs) when a holder of it becomes takeable.
local function queued(cx, r)
  local wake = 0
  for _, l in ipairs(r.ls) do
    local head = qat(l, 1)
    if head and head.i == r.i then
      local at = wakeat(l, r.x)
      if at > 0 and (wake == 0 or at < wake) then wake = at end
    end
  end
  return reply(cx, 'queued', wake)
end

-- enqueue puts the request at the back of every queue.
local function enqueue(cx, r)
  r.i, r.s = cx.me, cx.now
  for j, l in ipairs(r.ls) do
    local k = tagkey(cx, l.name, 'n')
    redis.call('HSET', k, cx.node, num(cx.now + r.wttl))
    cx.alive[k] = nil
    pushq(l, {i = r.i, d = cx.node, r = r.r, k = r.k, s = cx.now, w = r.W[j], L = r.L, W = r.W,
      l = r.l, o = r.o, x = r.x, c = r.c})
    cx.ev[#cx.ev + 1] = event(WAITING, l, r.r, r.k, 0, r.W[j], 0, 0, '', '')
  end
end

-- check answers a queued waiter's check: its grant, handed over already
-- or made now, else where it waits.
local function check(cx, r)
  local g = claim(cx, r)
  if g then return reply(cx, 'granted', g) end
  local p = position(r.ls[1], cx.me)
  if p then
    r.i, r.s = cx.me, r.ls[1].q[p].s
  else
    enqueue(cx, r) -- taken for dead meanwhile: back of the queue
  end
  local name, w, slots = heavy(cx, r, true)
  if name then return reply(cx, 'heavy', name, w, slots, 1) end
  for _, l in ipairs(r.ls) do
    advance(l, false)
    if cx.mine then
      for _, e in ipairs(cx.mine[2]) do cx.ev[#cx.ev + 1] = e end
      return reply(cx, 'granted', cx.mine[1])
    end
  end
  return queued(cx, r)
end

-- partly returns the first lock r's ref holds and its hold, when it holds
-- some of r's locks but not all.
local function partly(r)
  local first, held = nil, 0
  for _, l in ipairs(r.ls) do
    local i = find(l, r.r, 0)
    if i then
      held = held + 1
      first = first or {l, l.h[i]}
    end
  end
  if held > 0 and held < #r.ls then return first[1], first[2] end
end

-- attempt answers a try or a first attempt: granted, refused, or queued.
local function attempt(cx, r)
  local l, h = nil, nil
  if r.all then l, h = partly(r) end
  if l then return busy(cx, l, r.W[1], h) end
  local name, w, slots = heavy(cx, r, false)
  if name then return reply(cx, 'heavy', name, w, slots, 0) end
  for _, x in ipairs(r.ls) do advance(x, false) end
  local ok = true
  for j, x in ipairs(r.ls) do
    if not find(x, r.r, 0) then
      local n = need(r.W[j], x.slots)
      local want = ahead(x, math.huge, x.slots - n) + n
      if want > free(x, want, r.x) then
        ok = false
        if r.mode == 'try' then return busy(cx, x, r.W[j], nil) end
      end
    end
  end
  if ok then return reply(cx, 'granted', grant(cx, r, cx.ev)) end
  enqueue(cx, r)
  return queued(cx, r)
end

local function main(cx, argv)
  cx.me = argv[3]
  local r, missing = request(cx, argv)
  if not r then return reply(cx, 'notfound', missing) end
  if r.mode == 'check' then return check(cx, r) end
  return attempt(cx, r)
end
