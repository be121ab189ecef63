-- guard: runs the caller's writes only while ref holds every lock named
-- (past its expiry or not, as long as nobody took it over). ARGV: prefix, node,
-- ref, n, n names, n tokens, then each write as its argument count and
-- its arguments.
local function main(cx, argv)
  cx.ro = true
  local ref = argv[3]
  local n = tonumber(argv[4])
  for j = 1, n do
    local name = argv[4 + j]
    local l = load(cx, name)
    if not l then return reply(cx, 'notfound', name) end
    if not find(l, ref, tonumber(argv[4 + n + j])) then return reply(cx, 'lost', name) end
  end
  local i = 5 + 2 * n
  local out = {}
  while i <= #argv do
    local c = tonumber(argv[i])
    out[#out + 1] = redis.call(unpack(argv, i + 1, i + c))
    i = i + c + 1
  end
  return reply(cx, 'ok', out)
end
