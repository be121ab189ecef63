-- release: frees the holds of ref ('release'), or only while the first
-- is stale ('stale'), and hands the slots to the waiters. ARGV: prefix, node,
-- ref, mode, staleAfter µs, n, n names, n tokens, events wanted (fast.lua).
local function main(cx, argv)
  local ref, mode, stale = argv[3], argv[4], tonumber(argv[5])
  local n = tonumber(argv[6])
  local names, tokens = {}, {}
  for j = 1, n do
    names[j], tokens[j] = argv[6 + j], tonumber(argv[6 + n + j])
    if not defof(cx, names[j]) then return reply(cx, 'notfound', names[j]) end
  end
  if mode == 'stale' then
    local l = load(cx, names[1])
    local i = find(l, ref, tokens[1])
    if not i or not takeable(l.h[i], stale, cx.now) then return reply(cx, 'no') end
    for j = 2, n do tokens[j] = 0 end
  end
  local missing, freed = {}, 0
  for j, name in ipairs(names) do
    local l = load(cx, name)
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
  if freed == 0 then return reply(cx, 'notheld') end
  return reply(cx, 'ok', missing)
end
