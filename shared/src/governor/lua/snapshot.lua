-- ARGV: now, window_ms. Answers the gauges as a flat array of integers.
local t, total = advance(tonumber(ARGV[1]), tonumber(ARGV[2]))
local f = redis.call('HMGET', state, 'cooldown_until', 'down_until', 'admitted', 'deferred',
  'reserved_tokens', 'used_tokens', 'refunded_tokens', 'throttles')
local out = {t, total, redis.call('ZCARD', window)}
for i = 1, #f do out[#out + 1] = tonumber(f[i]) or 0 end
return out
