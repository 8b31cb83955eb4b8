-- ARGV: reservation id, tokens used. Answers {kind, tokens}:
-- {'refunded', n} | {'overran', n} | {'settled', 0}
-- A send's charge was counted as used when it was sent ('s:<id>' in the reconciled set): its
-- reconciliation counts the difference.
local id, used = ARGV[1], tonumber(ARGV[2])
if redis.call('SISMEMBER', reconciled, id) == 1 then return {'settled', 0} end
local counted = 0
if redis.call('SREM', reconciled, 's:' .. id) == 1 then
  counted = tonumber(redis.call('HGET', charges, id)) or 0
end
redis.call('HINCRBY', state, 'used_tokens', used - counted)
local before = tonumber(redis.call('HGET', charges, id))
if not before then return {'settled', 0} end
redis.call('HSET', charges, id, used)
redis.call('SADD', reconciled, id)
redis.call('HINCRBY', state, 'minute_tokens', used - before)
if redis.call('ZSCORE', short, id) then
  redis.call('HINCRBY', state, 'short_tokens', used - before)
end
if used <= before then
  redis.call('HINCRBY', state, 'refunded_tokens', before - used)
  return {'refunded', before - used}
end
return {'overran', used - before}
