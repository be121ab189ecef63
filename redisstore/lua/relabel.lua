-- relabel: sets the kind of ref's hold of one lock, only while ref holds
-- it (with the token, where not 0). ARGV: prefix, node, ref, kind, name,
-- token.
local function main(cx, argv)
  local ref, kind, name = argv[3], argv[4], argv[5]
  local l = load(cx, name)
  if not l then return reply(cx, 'notfound', name) end
  local i = find(l, ref, tonumber(argv[6]))
  if not i then return reply(cx, 'notheld') end
  l.h[i].k = kind
  l.dirty = true
  return reply(cx, 'ok')
end
