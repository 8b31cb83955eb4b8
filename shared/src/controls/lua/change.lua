-- Sets or clears one control and appends its audit entry, in one step. ARGV: prefix,
-- audit cap, field ('' for an audit entry alone), setting JSON ('' clears the field),
-- end ('' for none), the audit detail its expiry will carry, then the audit entry's
-- at, by, action, target, detail, source. Layout: see state.lua.
local P = ARGV[1]
local function key(...)
  return P .. ':' .. table.concat({ ... }, ':')
end
local cap, field, setting, till, ends = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
-- audit.lua here
if field ~= '' then
  if setting == '' then
    redis.call('HDEL', key('controls'), field)
    redis.call('HDEL', key('controls', 'ends'), field)
    redis.call('ZREM', key('controls', 'until'), field)
  else
    redis.call('HSET', key('controls'), field, setting)
    if till == '' then
      redis.call('HDEL', key('controls', 'ends'), field)
      redis.call('ZREM', key('controls', 'until'), field)
    else
      redis.call('HSET', key('controls', 'ends'), field, ends)
      redis.call('ZADD', key('controls', 'until'), till, field)
    end
  end
end
return append_audit('at', ARGV[7], 'by', ARGV[8],
  'action', ARGV[9], 'target', ARGV[10], 'detail', ARGV[11], 'source', ARGV[12])
