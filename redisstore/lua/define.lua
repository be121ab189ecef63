-- define: every definition or none. ARGV: prefix, node, n, n names, n slots.
-- Answer: the created flags, or a conflict {name, slots, asked}.
local n = tonumber(ARGV[3])
local pending, created = {}, {}
for j = 1, n do
  local name, slots = ARGV[3 + j], tonumber(ARGV[3 + n + j])
  local have = pending[name] or redis.call('HGET', tagkey(name, 'd'), name)
  if have then
    if tonumber(have) ~= slots then return readreply('conflict', name, tonumber(have), slots) end
    created[j] = 0
  else
    pending[name] = slots
    created[j] = 1
  end
end
for j = 1, n do
  if created[j] == 1 then
    local name, slots = ARGV[3 + j], tonumber(ARGV[3 + n + j])
    redis.call('HSET', tagkey(name, 'd'), name, num(slots))
    if isfamily(name) then
      EV[#EV + 1] = {CREATED, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(name), ''}
    else
      defs[name] = nil
      local l = load(name)
      EV[#EV + 1] = event(CREATED, l, '', '', 0, 0, 0, 0, '', '')
    end
  end
end
return reply('ok', created)
