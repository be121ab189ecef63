-- stats: the counters and gauges of every definition of one root, its
-- families' members folded in, after counting the records' tallies. ARGV:
-- prefix, node, root. Entry: {name, family, slots, locks, running,
-- expired, waiting, {acquisitions, releases, expiries, losses, waited, wait
-- µs, holds, hold µs}, {wait buckets}, {hold buckets}}.

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
    if e and l.pend then l.dirty = true end -- save counts its tally
  end
  flush(cx)
  local cs = {}
  local s = redis.call('HGETALL', sk)
  for i = 1, #s, 2 do
    local def = string.match(s[i], '^(.*)\tc$')
    if def then cs[def] = cmsgpack.unpack(s[i + 1]) end
  end
  for _, x in ipairs(out) do
    local c = cs[x[1]] or {}
    local function n(i) return c[i] or 0 end
    local waits, holds, ends = {}, {}, 0 -- every hold that ended is in one hold bucket
    for b = 1, #BOUNDS + 1 do
      waits[b], holds[b] = n(WAIT_BUCKETS + b), n(HOLD_BUCKETS + b)
      ends = ends + holds[b]
    end
    x[8], x[9], x[10] = {n(ACQS), ends - n(EXPIRIES), n(EXPIRIES), n(LOSSES), n(WAITED),
      n(WAIT_US), ends, n(HOLD_US)}, waits, holds
  end
  return reply(cx, 'ok', out)
end
