-- stats: the counters and gauges of every definition of one root, its
-- families' members folded in. It writes only the hold times that
-- lua/fast.lua's releases left in the records (see addholds): into the
-- counters, and a record left with nothing else goes. ARGV: prefix, node,
-- root. Entry: {name, family, slots, locks, running, expired, waiting,
-- {counters...}, {wait buckets}, {hold buckets}}.
local function main(cx, argv)
  cx.ro = true
  local r = argv[3]
  local sk = rootkey(cx, r, 's')
  local out, at = {}, {}
  local d = redis.call('HGETALL', rootkey(cx, r, 'd'))
  for i = 1, #d, 2 do
    local x = {d[i], 0, tonumber(d[i + 1]), 1, 0, 0, 0}
    if isfamily(d[i]) then x[2], x[3], x[4] = 1, 0, 0 end
    out[#out + 1] = x
    at[d[i]] = x
  end
  for _, m in ipairs(members(sk)) do
    local l = load(cx, m)
    local e = l and at[l.def]
    if e then
      for _, h in ipairs(l.h) do
        if live(h, cx.now) then e[5] = e[5] + 1 else e[6] = e[6] + 1 end
      end
      e[7] = e[7] + #qall(l)
      if e[2] == 1 and (#l.h > 0 or #l.q > 0) then
        e[4] = e[4] + 1
        e[3] = e[3] + l.slots
      end
    end
    if e and l.pend then l.dirty = true end -- save counts its hold times
  end
  flush(cx)
  local counters = countersof(sk)
  for _, x in ipairs(out) do
    local c = counters[x[1]] or {0, 0, 0, 0, 0, 0, 0, 0, {}, {}}
    local wb, hb, ends = {}, {}, 0
    for b = 1, #BOUNDS + 1 do
      wb[b] = c[9][b] or 0
      hb[b] = c[10][b] or 0
      ends = ends + hb[b]
    end
    c[2] = ends - c[3] -- every hold that ended, released or expired, is in one hold bucket
    x[8], x[9], x[10] = {c[1], c[2], c[3], c[4], c[5], c[6], c[2] + c[3], c[8]}, wb, hb
  end
  return readreply(cx, 'ok', out)
end
