-- close: takes a closing node's waiters out of the queues under each
-- root given. ARGV: prefix, node, roots.
local function main(cx, argv)
  local node = argv[2]
  for j = 3, #argv do
    local r = argv[j]
    for _, name in ipairs(redis.call('SMEMBERS', rootkey(cx, r, 'q'))) do
      local l = load(cx, name)
      if l then
        local i = 1
        qall(l)
        while i <= #l.q do
          local w = l.q[i]
          if w.d == node then
            table.remove(l.q, i)
            dropq(l, w.i, true)
          else
            i = i + 1
          end
        end
        advance(l, false)
      end
    end
    redis.call('HDEL', rootkey(cx, r, 'n'), node)
  end
  return reply(cx, 'ok')
end
