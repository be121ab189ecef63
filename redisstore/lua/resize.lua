-- resize: changes the slots of a lock or family and grants the waiters
-- that now fit (define in common.lua). ARGV: prefix, node, name, slots.
local function main(cx, argv)
  local name, slots = argv[3], tonumber(argv[4])
  local have = redis.call('HGET', tagkey(cx, name, 'd'), name)
  if not have then return reply(cx, 'notfound', name) end
  if tonumber(have) == slots then return reply(cx, 'ok') end
  define(cx, RESIZED, name, slots)
  return reply(cx, 'ok')
end
