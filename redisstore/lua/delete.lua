-- delete: deletes the lock or family ARGV[3] (a family's members in use
-- too), refused when one is held or waited for unless ARGV[4] is '1'.
-- ARGV: prefix, node, name, force. Answers: 'notfound'; 'inuse', the
-- first lock in use, holders, waiters (nothing written); 'ok', holders,
-- waiters ended. Ended holds are released by another (their nodes are
-- told); ended waiters leave every queue and are told to check again,
-- and find no definition. The root's last token (field "" of P{R}:d)
-- stays, so a lock defined again grants tokens above its old ones.
local name, force = ARGV[3], ARGV[4] == '1'
local k = tagkey(name, 'd')
local slots = redis.call('HGET', k, name)
if not slots then return readreply('notfound', name) end
slots = tonumber(slots)
RO = true -- until it goes ahead: a refusal writes nothing
local ls = {}
if isfamily(name) then
  local ms = redis.call('SMEMBERS', tagkey(name, 'u'))
  table.sort(ms)
  for _, m in ipairs(ms) do
    local l = load(m)
    if l and l.def == name then ls[#ls + 1] = l end
  end
else
  ls[1] = load(name)
end
local holders, waiters, first = 0, 0, nil
for _, l in ipairs(ls) do
  holders = holders + #l.h
  waiters = waiters + #qall(l)
  if not first and #l.h + #l.q > 0 then first = l.name end
end
if first and not force then return readreply('inuse', first, holders, waiters) end
RO = false
local DELETED = 9
for _, l in ipairs(ls) do
  for _, w in ipairs(l.q) do
    for _, other in ipairs(w.L) do
      if other ~= l.name then
        local o = load(other)
        if o then unqueue(o, w.i) end
      end
    end
    publish(w.d, 'c\t' .. w.i)
  end
  redis.call('DEL', l.wk, l.bk)
  l.q, l.qraw, l.qlen = {}, 0, 0
  local lost = 'released by another caller: lock "' .. l.name .. '" was deleted'
  while #l.h > 0 do drop(l, #l.h, false, lost) end
  l.dirty = true
  if l.name ~= name then
    EV[#EV + 1] = {DELETED, l.name, l.slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(l.name), ''}
  end
end
redis.call('HDEL', k, name)
-- its counters go, those this call counted too
local sk = tagkey(name, 's')
local byk = stats[sk] or {}
local fields = {}
for _, c in ipairs({'1', '2', '3', '4', '5', '6', '7', '8'}) do fields[#fields + 1] = name .. '\t' .. c end
for b = 1, #BOUNDS + 1 do
  fields[#fields + 1] = name .. '\tw' .. b
  fields[#fields + 1] = name .. '\th' .. b
end
for _, f in ipairs(fields) do byk[f] = nil end
redis.call('HDEL', sk, unpack(fields))
EV[#EV + 1] = {DELETED, name, slots, 0, 0, '', '', 0, 0, 0, 0, '', nextid(name), ''}
return reply('ok', holders, waiters)
