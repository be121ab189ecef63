-- reconcile: reads the definitions a Reconcile plans from (guard ''), or
-- carries out its plan (store.PlanReconcile) if they did not change. ARGV:
-- prefix, node, guard, prune, force, n, n names, then the plan: k, k
-- triples kind ('p' prune, 'c' create, 'r' resize), name, slots. The read
-- answers 'read', the guard, and {name, slots, first lock in use, holders,
-- waiters} of the names and, with prune, of every other definition. The
-- guard sums up what the plan depends on: the definitions and, without
-- force, which to prune are in use. A plan whose guard differs writes
-- nothing ('changed'); else 'ok', the holders and waiters the prunes ended.

-- wanted adds the definitions of argv's names to read and sums, and
-- returns the set of those names.
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

-- prunable adds every other definition to read and sums, and returns
-- them doomed, by name.
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

-- apply carries out the plan (argv from k), and returns the holders and
-- waiters the prunes end.
local function apply(cx, argv, k, doomed)
  local t = {holders = 0, waiters = 0}
  for i = 1, tonumber(argv[k]) do
    if argv[k + 3 * i - 2] == 'p' then inuse(doomed[argv[k + 3 * i - 1]], t) end
  end
  for i = 1, tonumber(argv[k]) do
    local kind, name, slots = argv[k + 3 * i - 2], argv[k + 3 * i - 1], tonumber(argv[k + 3 * i])
    if kind == 'p' then
      remove(cx, doomed[name])
    else
      define(cx, kind == 'c' and CREATED or RESIZED, name, slots)
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
