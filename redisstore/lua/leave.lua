-- leave: a waiter whose caller gave up leaves every queue; a grant made
-- to it meanwhile goes to the next waiter. ARGV: prefix, node, waiter id, n,
-- n names.
local function main(cx, argv)
  local wid = argv[3]
  local n = tonumber(argv[4])
  local took = 0
  for j = 1, n do
    local l = load(cx, argv[4 + j])
    if l then
      unqueue(l, wid)
      for i, h in ipairs(l.h) do
        if h.i == wid then
          drop(l, i, false, nil)
          took = 1
          break
        end
      end
      advance(l, false)
    end
  end
  return reply(cx, 'ok', took)
end
