-- state: one lock or family; writes nothing. ARGV: prefix, node, name, detail.
local function main(cx, argv)
  cx.ro = true
  local st = state(cx, argv[3], argv[4] == '1')
  if not st then return reply(cx, 'notfound', argv[3]) end
  return reply(cx, 'ok', st)
end
