-- list: the definitions of one root and its members in use; writes
-- nothing. ARGV: prefix, node, root, detail.
local function main(cx, argv)
  cx.ro = true
  local r, detail = argv[3], argv[4] == '1'
  local names, defined = {}, {}
  local d = redis.call('HGETALL', rootkey(cx, r, 'd'))
  for i = 1, #d, 2 do
    if d[i] ~= '' then
      names[#names + 1] = d[i]
      defined[d[i]] = true
    end
  end
  for _, m in ipairs(members(rootkey(cx, r, 's'))) do
    if not defined[m] then names[#names + 1] = m end
  end
  local out = {}
  for _, name in ipairs(names) do
    local st = state(cx, name, detail)
    if st and (defined[name] or st[4] + st[5] + st[7] > 0) then out[#out + 1] = st end
  end
  return reply(cx, 'ok', out)
end
