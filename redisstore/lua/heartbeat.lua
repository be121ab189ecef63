-- heartbeat: keeps a node's waiters alive under each root given, and
-- takes the waiters of nodes that stopped beating out of the queues.
-- ARGV: prefix, node, waiter TTL µs, roots. Answer: the roots where the
-- node had been taken for dead (its waiters must queue again).
local function main(cx, argv)
  local node, wttl = argv[2], tonumber(argv[3])
  local lapsed = {}
  for j = 4, #argv do
    local r = argv[j]
    local k = rootkey(cx, r, 'n')
    local was = tonumber(redis.call('HGET', k, node) or '0')
    if was <= cx.now then lapsed[#lapsed + 1] = r end
    redis.call('HSET', k, node, num(cx.now + wttl))
    local nodes = redis.call('HGETALL', k)
    local dead = {}
    for i = 1, #nodes, 2 do
      if tonumber(nodes[i + 1]) <= cx.now then dead[#dead + 1] = nodes[i] end
    end
    if #dead > 0 then
      sweep(cx, r)
      redis.call('HDEL', k, unpack(dead))
    end
  end
  return reply(cx, 'ok', lapsed)
end
