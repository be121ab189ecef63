-- advance (tests only): moves every stored time of the roots given back
-- by d µs, as if d had passed on the server's clock, then asks every
-- node to check its waiters again. ARGV: prefix, d, roots.
local d = tonumber(ARGV[3])
for j = 4, #ARGV do
  local r = ARGV[j]
  for _, name in ipairs(redis.call('SMEMBERS', rootkey(r, 'u'))) do
    local key = lockkey(name)
    local raw = redis.call('GET', key)
    if raw then
      local o = cmsgpack.unpack(raw)
      for _, h in ipairs(o.h or {}) do
        h.a, h.n = h.a - d, h.n - d
        if h.e ~= 0 then h.e = h.e - d end
      end
      for _, w in ipairs(o.q or {}) do w.s = w.s - d end
      redis.call('SET', key, cmsgpack.pack(o))
    end
  end
  local nodes = redis.call('HKEYS', rootkey(r, 'n'))
  for _, node in ipairs(nodes) do redis.call('PUBLISH', P .. 'node:' .. node, 'a\t') end
end
return {'ok', NOW, {}, {}}
