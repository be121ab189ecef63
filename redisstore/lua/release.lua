-- release: frees the holds of ref ('release'), or only while the first
-- is stale ('stale'), and hands the slots to the waiters. ARGV: prefix, node,
-- ref, mode, staleAfter µs, n, n names, n tokens, events wanted (fast.lua).
local ref, mode, stale = ARGV[3], ARGV[4], tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local names, tokens = {}, {}
for j = 1, n do
  names[j] = ARGV[6 + j]
  tokens[j] = tonumber(ARGV[6 + n + j])
end
for _, name in ipairs(names) do
  if not defof(name) then return readreply('notfound', name) end
end
if mode == 'stale' then
  local l = load(names[1])
  local i = find(l, ref, tokens[1])
  if not i then return readreply('no') end
  local h = l.h[i]
  if h.e == 0 then return readreply('no') end
  local old = h.e <= NOW
  if stale > 0 then old = h.n + stale <= NOW end
  if not old then return readreply('no') end
  for j = 2, n do tokens[j] = 0 end
end
local missing, freed = {}, 0
for j, name in ipairs(names) do
  local l = load(name)
  local i = find(l, ref, tokens[j])
  if not i then
    missing[#missing + 1] = name
  else
    freed = freed + 1
    local h = l.h[i]
    if h.c > 1 then
      h.c = h.c - 1
      l.dirty = true
    else
      local lost
      if tokens[j] == 0 then lost = 'released by another caller naming its ref' end
      drop(l, i, false, lost)
      advance(l, false)
    end
  end
end
if freed == 0 then return reply('notheld') end
return reply('ok', missing)
