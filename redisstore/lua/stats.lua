-- stats: the counters and gauges of every definition of one root, its
-- families' members folded in, after counting the records' tallies. ARGV:
-- prefix, node, root. Entry: {name, family, slots, locks, running,
-- expired, waiting, {counters 1..8}, {wait buckets}, {hold buckets}}.

-- zeros returns {counters, wait buckets, hold buckets}, all 0.
local function zeros()
  local e = {{0, 0, 0, 0, 0, 0, 0, 0}, {}, {}}
  for b = 1, #BOUNDS + 1 do e[2][b], e[3][b] = 0, 0 end
  return e
end

-- countersof returns the counters of state hash sk, by definition.
local function countersof(sk)
  local out = {}
  local s = redis.call('HGETALL', sk)
  for i = 1, #s, 2 do
    local def, c = string.match(s[i], '^(.*)\t(.-)$')
    if def then
      local e = out[def] or zeros()
      out[def] = e
      if c == 'H' then
        local t = cmsgpack.unpack(s[i + 1])
        e[1][8] = t[1]
        for b = 1, #BOUNDS + 1 do e[3][b] = t[b + 1] end
      elseif string.sub(c, 1, 1) == 'w' then
        e[2][tonumber(string.sub(c, 2))] = tonumber(s[i + 1])
      else
        e[1][tonumber(c)] = tonumber(s[i + 1])
      end
    end
  end
  return out
end

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
  local counters = countersof(sk)
  for _, x in ipairs(out) do
    local e = counters[x[1]] or zeros()
    local ends = 0 -- every hold that ended, released or expired, is in one hold bucket
    for b = 1, #BOUNDS + 1 do ends = ends + e[3][b] end
    e[1][2], e[1][7] = ends - e[1][3], ends
    x[8], x[9], x[10] = e[1], e[2], e[3]
  end
  return reply(cx, 'ok', out)
end
