-- delete: deletes the lock or family ARGV[3] (a family's members in use
-- too), refused when one is held or waited for unless ARGV[4] is '1'.
-- ARGV: prefix, node, name, force. Answers: 'notfound'; 'inuse', the
-- first lock in use, holders, waiters (nothing written); 'ok', holders,
-- waiters ended (see remove in common.lua).
local function main(cx, argv)
  local name, force = argv[3], argv[4] == '1'
  cx.ro = true -- until it goes ahead: a refusal writes nothing
  local x = doom(cx, name)
  if not x then return reply(cx, 'notfound', name) end
  local t = {holders = 0, waiters = 0}
  inuse(x, t)
  if t.first and not force then return reply(cx, 'inuse', t.first, t.holders, t.waiters) end
  cx.ro = false
  remove(cx, x)
  return reply(cx, 'ok', t.holders, t.waiters)
end
