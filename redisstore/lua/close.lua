-- close: takes a closing node's waiters out of the queues under each
-- root given. ARGV: prefix, node, roots.
local node = ARGV[2]
for j = 3, #ARGV do
  local r = ARGV[j]
  for _, name in ipairs(redis.call('SMEMBERS', rootkey(r, 'q'))) do
    local l = load(name)
    if l then
      local i = 1
      while i <= #l.q do
        if l.q[i].d == node then
          table.remove(l.q, i)
          l.dirty = true
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
