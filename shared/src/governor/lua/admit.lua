-- ARGV: now, cost, window_ms, limit_tokens, limit_requests, limit_minute_tokens
-- Answers {kind, a, b}: {'admitted', id, t} | {'deferred', retry_at, 0}
-- | {'cooling_down', until, 0} | {'down', until, 0}
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local window_ms, limit_tokens, limit_requests = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local limit_minute = tonumber(ARGV[6])
local t, minute_total, short_total = advance(now, window_ms)

local down = tonumber(redis.call('HGET', state, 'down_until')) or 0
if down > t then return {'down', down, 0} end
local cool = tonumber(redis.call('HGET', state, 'cooldown_until')) or 0
if cool > t then return {'cooling_down', cool, 0} end

local free_tokens, free_requests, count =
  free(t, limit_tokens, limit_requests, limit_minute, minute_total, short_total)
if cost <= free_tokens and free_requests >= 1 then
  local id = redis.call('HINCRBY', state, 'seq', 1)
  redis.call('ZADD', window, t, id)
  redis.call('ZADD', short, t, id)
  redis.call('HSET', charges, id, cost)
  redis.call('HSET', state, 'minute_tokens', minute_total + cost, 'short_tokens', short_total + cost)
  redis.call('HINCRBY', state, 'admitted', 1)
  redis.call('HINCRBY', state, 'reserved_tokens', cost)
  return {'admitted', id, t}
end

-- Deferred: the first instant the oldest entries' expiry (and the external
-- reservation's end) makes room in both windows; both only get easier as entries
-- leave, so it is the later of the two.
redis.call('HINCRBY', state, 'deferred', 1)
local ext_tokens, ext_requests, ext_until = external(t)
local minute_departures = {}
local entries = redis.call('ZRANGE', window, 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  minute_departures[#minute_departures + 1] = {
    tonumber(entries[i + 1]) + MINUTE_MS, tonumber(redis.call('HGET', charges, entries[i])) or 0, 0 }
end
local minute_room = earliest_room(minute_total + ext_tokens + cost - limit_minute, 0,
  minute_departures, ext_until, ext_tokens, ext_requests, t) or (t + MINUTE_MS)
local ids, ats, amounts = short_entries()
local short_departures = {}
for i = 1, #ids do
  short_departures[i] = { ats[i] + window_ms, amounts[i], 1 }
end
local short_room = earliest_room(short_total + ext_tokens + cost - limit_tokens,
  count + ext_requests + 1 - limit_requests, short_departures, ext_until, ext_tokens, ext_requests, t)
  or (t + window_ms)
if short_room > minute_room then minute_room = short_room end
return {'deferred', minute_room, 0}
