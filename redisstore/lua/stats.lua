-- stats: the counters and gauges of every definition of one root, its
-- families' members folded in; writes nothing. ARGV: prefix, node, root.
-- Entry: {name, family, slots, locks, running, expired, waiting,
-- {counters...}, {wait buckets}, {hold buckets}}.
RO = true
local r = ARGV[3]
local d = redis.call('HGETALL', rootkey(r, 's'))
local counters = {}
for i = 1, #d, 2 do
  local def, c = string.match(d[i], '^(.*)\t(.-)$')
  local e = counters[def]
  if not e then
    e = {0, 0, 0, 0, 0, 0, 0, 0, {}, {}}
    counters[def] = e
  end
  local n = tonumber(d[i + 1])
  local k, b = string.sub(c, 1, 1), tonumber(string.sub(c, 2))
  if k == 'w' then
    e[9][b] = n
  elseif k == 'h' then
    e[10][b] = n
  else
    e[tonumber(c)] = n
  end
end
local out, at = {}, {}
d = redis.call('HGETALL', rootkey(r, 'd'))
for i = 1, #d, 2 do
  local name = d[i]
  if name ~= '' then
    local c = counters[name] or {0, 0, 0, 0, 0, 0, 0, 0, {}, {}}
    local wb, hb, ends = {}, {}, 0
    for b = 1, #BOUNDS + 1 do
      wb[b] = c[9][b] or 0
      hb[b] = c[10][b] or 0
      ends = ends + hb[b]
    end
    c[2] = ends - c[3] -- every hold that ended, released or expired, is in one hold bucket
    local fam, slots, nl = 0, tonumber(d[i + 1]), 1
    if isfamily(name) then fam, slots, nl = 1, 0, 0 end
    out[#out + 1] = {name, fam, slots, nl, 0, 0, 0, {c[1], c[2], c[3], c[4], c[5], c[6], c[2] + c[3], c[8]}, wb, hb}
    at[name] = out[#out]
  end
end
for _, m in ipairs(redis.call('SMEMBERS', rootkey(r, 'u'))) do
  local l = load(m)
  if l and at[l.def] then
    local e = at[l.def]
    for _, h in ipairs(l.h) do
      if live(h) then e[5] = e[5] + 1 else e[6] = e[6] + 1 end
    end
    e[7] = e[7] + #qall(l)
    if e[2] == 1 and (#l.h > 0 or #l.q > 0) then
      e[4] = e[4] + 1
      e[3] = e[3] + l.slots
    end
  end
end
return readreply('ok', out)
