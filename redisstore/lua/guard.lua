-- guard: runs the caller's writes only while ref holds every lock named
-- (past its expiry or not, as long as nobody took it over). ARGV: prefix, node,
-- ref, n, n names, n tokens, then each write as its argument count and
-- its arguments.
RO = true
local ref = ARGV[3]
local n = tonumber(ARGV[4])
for j = 1, n do
  local name = ARGV[4 + j]
  local l = load(name)
  if not l then return readreply('notfound', name) end
  if not find(l, ref, tonumber(ARGV[4 + n + j])) then return readreply('lost', name) end
end
local i = 5 + 2 * n
local out = {}
while i <= #ARGV do
  local c = tonumber(ARGV[i])
  out[#out + 1] = redis.call(unpack(ARGV, i + 1, i + c))
  i = i + c + 1
end
return readreply('ok', out)
