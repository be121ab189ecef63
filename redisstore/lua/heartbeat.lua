-- heartbeat: keeps a node's waiters alive under each root given, and
-- takes the waiters of nodes that stopped beating out of the queues.
-- ARGV: prefix, node, waiter TTL µs, roots. Answer: the roots where the
-- node had been taken for dead (its waiters must queue again).
local node, wttl = ARGV[2], tonumber(ARGV[3])
local lapsed = {}
for j = 4, #ARGV do
  local r = ARGV[j]
  local k = rootkey(r, 'n')
  local was = tonumber(redis.call('HGET', k, node) or '0')
  if was <= NOW then lapsed[#lapsed + 1] = r end
  redis.call('HSET', k, node, num(NOW + wttl))
  local nodes = redis.call('HGETALL', k)
  local dead = {}
  for i = 1, #nodes, 2 do
    if tonumber(nodes[i + 1]) <= NOW then dead[#dead + 1] = nodes[i] end
  end
  if #dead > 0 then
    for _, name in ipairs(redis.call('SMEMBERS', rootkey(r, 'q'))) do
      local l = load(name)
      if l then
        qall(l) -- takes the dead waiters out
        advance(l, false)
      end
    end
    redis.call('HDEL', k, unpack(dead))
  end
end
return reply('ok', lapsed)
