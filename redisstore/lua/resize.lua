-- resize: changes the slots of a lock or family and grants the waiters
-- that now fit. ARGV: prefix, node, name, slots.
local name, slots = ARGV[3], tonumber(ARGV[4])
local k = tagkey(name, 'd')
local have = redis.call('HGET', k, name)
if not have then return readreply('notfound', name) end
if tonumber(have) == slots then return readreply('ok') end
redis.call('HSET', k, name, num(slots))
if isfamily(name) then
  for _, m in ipairs(redis.call('SMEMBERS', tagkey(name, 'u'))) do
    local l = load(m)
    if l and l.def == name then advance(l, true) end
  end
  EV[#EV + 1] = {RESIZED, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(name), ''}
else
  local l = load(name)
  advance(l, true)
  EV[#EV + 1] = event(RESIZED, l, '', '', 0, 0, 0, 0, '', '')
end
return reply('ok')
