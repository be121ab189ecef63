-- resize: changes the slots of a lock or family and grants the waiters
-- that now fit (resize in common.lua). ARGV: prefix, node, name, slots.
local name, slots = ARGV[3], tonumber(ARGV[4])
local have = redis.call('HGET', tagkey(name, 'd'), name)
if not have then return readreply('notfound', name) end
if tonumber(have) == slots then return readreply('ok') end
resize(name, slots)
return reply('ok')
