-- ARGV: now, window_ms. Answers the gauges as a flat array of integers.
local t, minute_total, short_total = advance(tonumber(ARGV[1]), tonumber(ARGV[2]))
local f = redis.call('HMGET', state, 'cooldown_until', 'down_until', 'admitted', 'deferred',
  'reserved_tokens', 'used_tokens', 'refunded_tokens', 'throttles', 'shortfalls')
local out = {t, short_total, redis.call('ZCARD', short), minute_total}
for i = 1, #f do out[#out + 1] = tonumber(f[i]) or 0 end
local ext_tokens, ext_requests, ext_until = external(t)
out[#out + 1] = ext_tokens
out[#out + 1] = ext_requests
out[#out + 1] = ext_until
return out
