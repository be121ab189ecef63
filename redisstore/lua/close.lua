-- close: takes a closing node's waiters out of the queues under each
-- root given. ARGV: prefix, node, roots.
local node = ARGV[2]
for j = 3, #ARGV do
  local r = ARGV[j]
  for _, name in ipairs(redis.call('SMEMBERS', rootkey(r, 'q'))) do
    local l = load(name)
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
  redis.call('HDEL', rootkey(r, 'n'), node)
end
return reply('ok')
