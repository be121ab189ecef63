-- reconcile: reads the definitions a Reconcile plans from, or carries out
-- its plan (store.PlanReconcile, in Go) if they did not change. ARGV:
-- prefix, node, guard, prune, force, n, n names, then the plan: k, k
-- triples kind ('p' prune, 'c' create, 'r' resize), name, slots.
-- The read (guard ''), which writes nothing, answers 'read', the guard,
-- and for each definition read {name, slots, first lock in use, holders,
-- waiters}: those the names name and, with prune, every other one of
-- every root (Proots) with its use. The guard sums up what the plan
-- depends on: the definitions and, without force, which of those to
-- prune are in use. Given the guard it was made from, the plan is carried
-- out if the guard is the same ('ok', the holders and waiters the prunes
-- ended), else nothing is written ('changed': the caller reads again).
local guard, pruning, force = ARGV[3], ARGV[4] == '1', ARGV[5] == '1'
local n = tonumber(ARGV[6])
RO = true
local want, read, sums, doomed = {}, {}, {}, {}
for j = 1, n do
  local name = ARGV[6 + j]
  if not want[name] then
    want[name] = true
    local have = redis.call('HGET', tagkey(name, 'd'), name)
    if have then
      read[#read + 1] = {name, tonumber(have), '', 0, 0}
      sums[#sums + 1] = name .. '\t' .. have
    end
  end
end
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
      local t = {holders = 0, waiters = 0}
      inuse(x, t)
      doomed[name] = x
      read[#read + 1] = {name, x.slots, t.first or '', t.holders, t.waiters}
      sums[#sums + 1] = name .. '\t' .. x.slots .. '\t' .. ((force or not t.first) and '' or 'u')
    end
  end
end
local sum = '=' .. table.concat(sums, '\n') -- never '', the read's guard
if guard == '' then return readreply('read', sum, read) end
if guard ~= sum then return readreply('changed') end
RO = false
local k = 7 + n
local t = {holders = 0, waiters = 0}
for i = 1, tonumber(ARGV[k]) do -- counted before any is removed
  if ARGV[k + 3 * i - 2] == 'p' then inuse(doomed[ARGV[k + 3 * i - 1]], t) end
end
for i = 1, tonumber(ARGV[k]) do
  local kind, name, slots = ARGV[k + 3 * i - 2], ARGV[k + 3 * i - 1], tonumber(ARGV[k + 3 * i])
  if kind == 'p' then
    remove(doomed[name])
  elseif kind == 'c' then
    redis.call('HSET', tagkey(name, 'd'), name, num(slots))
    defs = {}
    if isfamily(name) then
      EV[#EV + 1] = {CREATED, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(name), ''}
    else
      local l = locks[name] -- a member of a family pruned above: emptied
      if l then l.def, l.slots = name, slots else l = load(name) end
      EV[#EV + 1] = event(CREATED, l, '', '', 0, 0, 0, 0, '', '')
    end
  else
    resize(name, slots)
  end
end
return reply('ok', t.holders, t.waiters)
