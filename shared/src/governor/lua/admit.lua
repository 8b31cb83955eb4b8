-- ARGV: now, cost, window_ms, limit_tokens, limit_requests, limit_minute_tokens
-- Answers {kind, a, b}: {'admitted', id, t} | {'deferred', retry_at, 0}
-- | {'cooling_down', until, 0} | {'down', until, 0}
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local window_ms, limit_tokens, limit_requests = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local limit_minute = tonumber(ARGV[6])
local t, minute_total = advance(now)

local down = tonumber(redis.call('HGET', state, 'down_until')) or 0
if down > t then return {'down', down, 0} end
local cool = tonumber(redis.call('HGET', state, 'cooldown_until')) or 0
if cool > t then return {'cooling_down', cool, 0} end

local ids, ats, amounts, short_total = short_window(t, window_ms)
if minute_total + cost <= limit_minute and short_total + cost <= limit_tokens
  and #ids < limit_requests then
  local id = redis.call('HINCRBY', state, 'seq', 1)
  redis.call('ZADD', window, t, id)
  redis.call('HSET', charges, id, cost)
  redis.call('HSET', state, 'minute_tokens', minute_total + cost)
  redis.call('HINCRBY', state, 'admitted', 1)
  redis.call('HINCRBY', state, 'reserved_tokens', cost)
  return {'admitted', id, t}
end

-- Deferred: the first instant the oldest entries' expiry makes room in both windows;
-- both only get easier as entries leave, so it is the later of the two.
redis.call('HINCRBY', state, 'deferred', 1)
local minute_room = t
local excess = minute_total + cost - limit_minute
if excess > 0 then
  minute_room = t + MINUTE_MS
  local entries = redis.call('ZRANGE', window, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    excess = excess - (tonumber(redis.call('HGET', charges, entries[i])) or 0)
    if excess <= 0 then
      minute_room = tonumber(entries[i + 1]) + MINUTE_MS
      break
    end
  end
end
local short_room = t
local excess_tokens = short_total + cost - limit_tokens
local excess_requests = #ids + 1 - limit_requests
if excess_tokens > 0 or excess_requests > 0 then
  short_room = t + window_ms
  for i = 1, #ids do
    excess_tokens = excess_tokens - amounts[i]
    excess_requests = excess_requests - 1
    if excess_tokens <= 0 and excess_requests <= 0 then
      short_room = ats[i] + window_ms
      break
    end
  end
end
if short_room > minute_room then minute_room = short_room end
return {'deferred', minute_room, 0}
