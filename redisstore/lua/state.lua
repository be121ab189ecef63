-- state: one lock or family; writes nothing. ARGV: prefix, node, name, detail.
RO = true
local st = state(ARGV[3], ARGV[4] == '1')
if not st then return readreply('notfound', ARGV[3]) end
return readreply('ok', st)
