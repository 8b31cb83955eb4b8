-- ARGV: now, cost, window_ms, limit_tokens, limit_requests
-- Answers {kind, a, b}: {'admitted', id, t} | {'deferred', retry_at, 0}
-- | {'cooling_down', until, 0} | {'down', until, 0}
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local window_ms, limit_tokens, limit_requests = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local t, total = advance(now, window_ms)

local down = tonumber(redis.call('HGET', state, 'down_until')) or 0
if down > t then return {'down', down, 0} end
local cool = tonumber(redis.call('HGET', state, 'cooldown_until')) or 0
if cool > t then return {'cooling_down', cool, 0} end

local ext_tokens, ext_requests, ext_until = external(t)
local count = redis.call('ZCARD', window)
if total + ext_tokens + cost <= limit_tokens and count + ext_requests < limit_requests then
  local id = redis.call('HINCRBY', state, 'seq', 1)
  redis.call('ZADD', window, t, id)
  redis.call('HSET', charges, id, cost)
  redis.call('HSET', state, 'window_tokens', total + cost)
  redis.call('HINCRBY', state, 'admitted', 1)
  redis.call('HINCRBY', state, 'reserved_tokens', cost)
  return {'admitted', id, t}
end

-- Deferred: the first instant the oldest entries' expiry (and the external
-- reservation's end) makes room.
redis.call('HINCRBY', state, 'deferred', 1)
local excess_tokens = total + ext_tokens + cost - limit_tokens
local excess_requests = count + ext_requests + 1 - limit_requests
local held = ext_tokens > 0 or ext_requests > 0
local entries = redis.call('ZRANGE', window, 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  local leaves_at = tonumber(entries[i + 1]) + window_ms
  if held and ext_until <= leaves_at then
    held = false
    excess_tokens = excess_tokens - ext_tokens
    excess_requests = excess_requests - ext_requests
    if excess_tokens <= 0 and excess_requests <= 0 then return {'deferred', ext_until, 0} end
  end
  excess_tokens = excess_tokens - (tonumber(redis.call('HGET', charges, entries[i])) or 0)
  excess_requests = excess_requests - 1
  if excess_tokens <= 0 and excess_requests <= 0 then
    return {'deferred', leaves_at, 0}
  end
end
if held then
  excess_tokens = excess_tokens - ext_tokens
  excess_requests = excess_requests - ext_requests
  if excess_tokens <= 0 and excess_requests <= 0 then return {'deferred', ext_until, 0} end
end
return {'deferred', t + window_ms, 0}
