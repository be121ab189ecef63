-- relabel: sets the kind of ref's hold of one lock, only while ref holds
-- it (with the token, where not 0). ARGV: prefix, node, ref, kind, name,
-- token.
local ref, kind, name = ARGV[3], ARGV[4], ARGV[5]
local l = load(name)
if not l then return readreply('notfound', name) end
local i = find(l, ref, tonumber(ARGV[6]))
if not i then return readreply('notheld') end
l.h[i].k = kind
l.dirty = true
return reply('ok')
