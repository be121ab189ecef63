-- advance (tests only): moves every stored time of the roots given back
-- by d µs, as if d had passed on the server's clock, then asks every
-- node to check its waiters again. ARGV: prefix, d, roots.
local d = tonumber(ARGV[3])
for j = 4, #ARGV do
  local r = ARGV[j]
  local sk = rootkey(cx, r, 's')
  for _, name in ipairs(members(sk)) do
    local raw = redis.call('HGET', sk, name)
    local function back(h) -- see the holder's fields in lua/common.lua
      h.a, h.n = h.a - d, h.n - d
      if h.e ~= 0 then h.e = h.e - d end
    end
    if raw and flat(raw) then
      local out, p = {string.sub(raw, 1, HOLDERS - 1)}, HOLDERS
      while p <= #raw do
        local h, counted
        h, counted, p = readholder(raw, p)
        back(h)
        out[#out + 1] = flatholder(h, counted and 1 or 0)
      end
      redis.call('HSET', sk, name, table.concat(out))
    elseif raw then
      local n, hs = cmsgpack.unpack(raw) -- a queue's record: no tally
      for _, h in ipairs(hs) do back(h) end
      redis.call('HSET', sk, name, cmsgpack.pack(n, hs))
    end
    local bk = tagkey(cx, name, 'b:' .. name)
    local ws = redis.call('HGETALL', bk)
    for i = 1, #ws, 2 do
      local w = cmsgpack.unpack(ws[i + 1])
      w.s = w.s - d
      redis.call('HSET', bk, ws[i], cmsgpack.pack(w))
    end
  end
  local nodes = redis.call('HKEYS', rootkey(cx, r, 'n'))
  for _, node in ipairs(nodes) do redis.call('PUBLISH', cx.p .. 'node:' .. node, 'a\t') end
end
return {'ok', cx.now, {}, {}}
