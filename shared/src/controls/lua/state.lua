-- The controls in force at `now`: each setting whose end has come is removed, with an
-- `expired` audit entry, then the rest is returned (HGETALL). ARGV: prefix, now, audit
-- cap, actor. Keys (namespace hash tag in ARGV[1]): `controls` (field -> setting JSON),
-- `controls:until` (field -> end), `controls:ends` (field -> the expiry's audit detail),
-- `audit` (stream, capped), `audit:trimmed` (entries the cap dropped, counted).
local P = ARGV[1]
local function key(...)
  return P .. ':' .. table.concat({ ... }, ':')
end
local now, cap, actor = ARGV[2], ARGV[3], ARGV[4]
-- audit.lua here
local due = redis.call('ZRANGEBYSCORE', key('controls', 'until'), '-inf', now)
for _, field in ipairs(due) do
  local detail = redis.call('HGET', key('controls', 'ends'), field) or ''
  redis.call('HDEL', key('controls'), field)
  redis.call('HDEL', key('controls', 'ends'), field)
  redis.call('ZREM', key('controls', 'until'), field)
  append_audit('at', now, 'by', actor,
    'action', 'expired', 'target', field, 'detail', detail, 'source', actor)
end
return redis.call('HGETALL', key('controls'))
