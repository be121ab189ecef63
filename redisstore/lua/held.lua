-- held: whether ref holds every lock named; writes nothing. ARGV: prefix, node,
-- ref, n, n names, n tokens. Answer: held, expired, renewed, expires.
local function main(cx, argv)
  cx.ro = true
  local ref = argv[3]
  local n = tonumber(argv[4])
  local held, expired, renewed, expires = 1, 0, 0, 0
  for j = 1, n do
    local name = argv[4 + j]
    local l = load(cx, name)
    if not l then return reply(cx, 'notfound', name) end
    local i = find(l, ref, tonumber(argv[4 + n + j]))
    if not i then
      held = 0
    else
      local h = l.h[i]
      if not live(h, cx.now) then expired = 1 end
      if j == 1 then
        renewed, expires = h.n, h.e
      elseif h.e ~= 0 and (expires == 0 or h.e < expires) then
        expires = h.e
      end
    end
  end
  if held == 0 then expired, renewed, expires = 0, 0, 0 end
  return reply(cx, 'ok', held, expired, renewed, expires)
end
