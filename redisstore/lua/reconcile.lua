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
-- wanted returns the definitions read of the names of argv, with their
-- sums (see the guard), and the set of those names.
local function wanted(cx, argv, read, sums)
  local want = {}
  for j = 1, tonumber(argv[6]) do
    local name = argv[6 + j]
    if not want[name] then
      want[name] = true
      local have = redis.call('HGET', tagkey(cx, name, 'd'), name)
      if have then
        read[#read + 1] = {name, tonumber(have), '', 0, 0}
        sums[#sums + 1] = name .. '\t' .. have
      end
    end
  end
  return want
end

-- prunable adds the definitions of every root that want does not name to
-- read and sums, with their use, and returns them doomed (see doom), by name.
local function prunable(cx, want, force, read, sums)
  local names, doomed = {}, {}
  for _, r in ipairs(redis.call('SMEMBERS', cx.p .. 'roots')) do
    for _, name in ipairs(redis.call('HKEYS', rootkey(cx, r, 'd'))) do
      if name ~= '' and not want[name] then names[#names + 1] = name end
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local x = doom(cx, name)
    if x then
      local t = {holders = 0, waiters = 0}
      inuse(x, t)
      doomed[name] = x
      read[#read + 1] = {name, x.slots, t.first or '', t.holders, t.waiters}
      sums[#sums + 1] = name .. '\t' .. x.slots .. '\t' .. ((force or not t.first) and '' or 'u')
    end
  end
  return doomed
end

-- create defines name with slots (a member of a family pruned before it
-- is loaded already, emptied).
local function create(cx, name, slots)
  redis.call('HSET', tagkey(cx, name, 'd'), name, num(slots))
  cx.defs = {}
  if isfamily(name) then
    defevent(cx, CREATED, name, slots)
    return
  end
  local l = cx.locks[name]
  if l then l.def, l.slots = name, slots else l = load(cx, name) end
  cx.ev[#cx.ev + 1] = event(CREATED, l, '', '', 0, 0, 0, 0, '', '')
end

-- apply carries out the plan of argv from k on, and returns the holders
-- and waiters the prunes ended (counted before any is removed).
local function apply(cx, argv, k, doomed)
  local t = {holders = 0, waiters = 0}
  for i = 1, tonumber(argv[k]) do
    if argv[k + 3 * i - 2] == 'p' then inuse(doomed[argv[k + 3 * i - 1]], t) end
  end
  for i = 1, tonumber(argv[k]) do
    local kind, name, slots = argv[k + 3 * i - 2], argv[k + 3 * i - 1], tonumber(argv[k + 3 * i])
    if kind == 'p' then
      remove(cx, doomed[name])
    elseif kind == 'c' then
      create(cx, name, slots)
    else
      resize(cx, name, slots)
    end
  end
  return t
end

local function main(cx, argv)
  local guard = argv[3]
  cx.ro = true
  local read, sums, doomed = {}, {}, {}
  local want = wanted(cx, argv, read, sums)
  if argv[4] == '1' then doomed = prunable(cx, want, argv[5] == '1', read, sums) end
  local sum = '=' .. table.concat(sums, '\n') -- never '', the read's guard
  if guard == '' then return reply(cx, 'read', sum, read) end
  if guard ~= sum then return reply(cx, 'changed') end
  cx.ro = false
  local t = apply(cx, argv, 7 + tonumber(argv[6]), doomed)
  return reply(cx, 'ok', t.holders, t.waiters)
end
