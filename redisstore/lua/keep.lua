-- keep: renews every hold of ref, only while it holds them all. ARGV:
-- prefix, node, ref, ttl µs, hold µs, n, n names, n tokens.
local function main(cx, argv)
  local ref, ttl, hold = argv[3], tonumber(argv[4]), tonumber(argv[5])
  local n = tonumber(argv[6])
  local rows = {}
  for j = 1, n do
    local name = argv[6 + j]
    local l = load(cx, name)
    if not l then return reply(cx, 'notfound', name) end
    local i = find(l, ref, tonumber(argv[6 + n + j]))
    if i then rows[#rows + 1] = {l, l.h[i]} end
  end
  if #rows ~= n then return reply(cx, 'notheld') end
  local exp = 0
  for _, x in ipairs(rows) do
    local l, h = x[1], x[2]
    h.e, h.n = leasetimes(cx.now, ttl, hold, h.a)
    h.l, h.o, h.u = ttl, hold, nil -- a renewal claims a grant handed to a waiter
    l.dirty = true
    if h.e ~= 0 and (exp == 0 or h.e < exp) then exp = h.e end
  end
  return reply(cx, 'ok', exp)
end
