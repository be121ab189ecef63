-- close: takes a closing node's waiters out of the queues under each
-- root given. ARGV: prefix, node, roots.
local function main(cx, argv)
  for j = 3, #argv do
    redis.call('HDEL', rootkey(cx, argv[j], 'n'), cx.node) -- its waiters are dead from now
    sweep(cx, argv[j])
  end
  return reply(cx, 'ok')
end
