-- reconcile: makes the definitions those given, all or nothing. ARGV:
-- prefix, node, resize, prune, force, n, n names, n slots. An entry
-- defined with other slots is a conflict {name, slots, asked} unless
-- resize; with prune, every definition of every root (Proots) not given
-- is deleted as delete does ('inuse' {first, holders, waiters} unless
-- force). Nothing is written before every check has passed. Answer: 'ok',
-- {created names}, {resized names}, {deleted names}, holders, waiters.
local resizing, pruning, force = ARGV[3] == '1', ARGV[4] == '1', ARGV[5] == '1'
local n = tonumber(ARGV[6])
local want, act = {}, {}
RO = true
for j = 1, n do
  local name, slots = ARGV[6 + j], tonumber(ARGV[6 + n + j])
  if not want[name] then
    want[name] = slots
    local have = redis.call('HGET', tagkey(name, 'd'), name)
    if not have then
      act[j] = 'create'
    elseif tonumber(have) ~= slots then
      if not resizing then return readreply('conflict', name, tonumber(have), slots) end
      act[j] = 'resize'
    end
  end
end
local doomed, deleted = {}, {}
local t = {holders = 0, waiters = 0}
if pruning then
  local names = {}
  for _, r in ipairs(redis.call('SMEMBERS', P .. 'roots')) do
    for _, name in ipairs(redis.call('HKEYS', rootkey(r, 'd'))) do
      if name ~= '' and not want[name] then names[#names + 1] = name end
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local x = doom(name)
    if x then
      inuse(x, t)
      doomed[#doomed + 1] = x
      deleted[#deleted + 1] = name
    end
  end
  if t.first and not force then return readreply('inuse', t.first, t.holders, t.waiters) end
end
RO = false
for _, x in ipairs(doomed) do remove(x) end
local created, resized = {}, {}
for j = 1, n do
  local name, slots = ARGV[6 + j], tonumber(ARGV[6 + n + j])
  if act[j] == 'create' then
    redis.call('HSET', tagkey(name, 'd'), name, num(slots))
    defs = {}
    if isfamily(name) then
      EV[#EV + 1] = {CREATED, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(name), ''}
    else
      local l = locks[name] -- a member of a family pruned above: emptied
      if l then l.def, l.slots = name, slots else l = load(name) end
      EV[#EV + 1] = event(CREATED, l, '', '', 0, 0, 0, 0, '', '')
    end
    created[#created + 1] = name
  elseif act[j] == 'resize' then
    resize(name, slots)
    resized[#resized + 1] = name
  end
end
return reply('ok', created, resized, deleted, t.holders, t.waiters)
