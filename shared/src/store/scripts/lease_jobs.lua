-- Leases the named jobs if they are still pending in the tier; the rest are skipped.
-- KEYS[1]: the tier's leased set. ARGV: prefix, tier, expires_at, id1, id2, ...
-- Returns {json1, token1, json2, token2, ...} in the order given.
local tier, expires_at = ARGV[2], ARGV[3]
local seq = redis.call('INCR', key('lease_seq'))
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', job_key(id), 'tier', 'rank', 'co', 'json', 'token')
  if f[1] == tier and not f[5] then
    remove_pending(id, tier, f[2], f[3])
    local token = string.format('%d.%d', seq, i - 3)
    redis.call('HSET', job_key(id), 'token', token, 'exp', expires_at)
    redis.call('ZADD', KEYS[1], expires_at, id)
    table.insert(out, f[4])
    table.insert(out, token)
  end
end
return out
