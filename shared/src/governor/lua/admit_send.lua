-- ARGV: now, cost, window_ms, limit_tokens, limit_requests, limit_minute_tokens,
-- limit_send_requests, id of the hold the send replaces ('' for none).
-- Admits the call about to be sent in place of the hold (see the ledger rules): the windows
-- are judged as if the hold were gone, and fewer than limit_send_requests calls may have been
-- sent in the last second. A send's charge counts as used at once (member 's:<id>' of the
-- reconciled set marks it, see reconcile.lua). Answers {'sent', id, t} | {'deferred', retry_at, 0}
-- | {'cooling_down', until, 0} | {'down', until, 0}.
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local window_ms, limit_tokens, limit_requests = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local limit_minute, limit_send = tonumber(ARGV[6]), tonumber(ARGV[7])
local hold = ARGV[8]
local t, minute_total, short_total = advance(now, window_ms)

local down = tonumber(redis.call('HGET', state, 'down_until')) or 0
if down > t then return {'down', down, 0} end
local cool = tonumber(redis.call('HGET', state, 'cooldown_until')) or 0
if cool > t then return {'cooling_down', cool, 0} end

-- The hold's share of the windows while it is still in them.
local held, hold_in_short = 0, false
if hold ~= '' and redis.call('ZSCORE', window, hold) then
  held = tonumber(redis.call('HGET', charges, hold)) or 0
  hold_in_short = redis.call('ZSCORE', short, hold) ~= false
end
local short_held, short_held_requests = 0, 0
if hold_in_short then short_held, short_held_requests = held, 1 end

local ext_tokens, ext_requests, ext_until = external(t)
local count = redis.call('ZCARD', short)
local free_tokens = math.min(limit_tokens - (short_total - short_held) - ext_tokens,
  limit_minute - (minute_total - held) - ext_tokens)
local free_requests = limit_requests - (count - short_held_requests) - ext_requests
local sends = redis.call('ZCARD', sent)

if cost <= free_tokens and free_requests >= 1 and sends < limit_send then
  if hold ~= '' and redis.call('HEXISTS', charges, hold) == 1 then
    redis.call('ZREM', window, hold)
    redis.call('ZREM', short, hold)
    redis.call('HDEL', charges, hold)
    redis.call('SREM', reconciled, hold, 's:' .. hold)
    minute_total = minute_total - held
    short_total = short_total - short_held
    redis.call('HINCRBY', state, 'refunded_tokens', held)
  end
  local id = redis.call('HINCRBY', state, 'seq', 1)
  redis.call('ZADD', window, t, id)
  redis.call('ZADD', short, t, id)
  redis.call('ZADD', sent, t, id)
  redis.call('HSET', charges, id, cost)
  redis.call('SADD', reconciled, 's:' .. id)
  redis.call('HSET', state, 'minute_tokens', minute_total + cost, 'short_tokens', short_total + cost)
  if hold == '' then redis.call('HINCRBY', state, 'admitted', 1) end
  redis.call('HINCRBY', state, 'reserved_tokens', cost)
  redis.call('HINCRBY', state, 'used_tokens', cost)
  return {'sent', id, t}
end

-- Deferred: as admit.lua, with the hold left out of the windows, and no earlier than the
-- second of sends has room.
redis.call('HINCRBY', state, 'deferred', 1)
local minute_departures = {}
local entries = redis.call('ZRANGE', window, 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  if entries[i] ~= hold then
    minute_departures[#minute_departures + 1] = {
      tonumber(entries[i + 1]) + MINUTE_MS, tonumber(redis.call('HGET', charges, entries[i])) or 0, 0 }
  end
end
local room = earliest_room(minute_total - held + ext_tokens + cost - limit_minute, 0,
  minute_departures, ext_until, ext_tokens, ext_requests, t) or (t + MINUTE_MS)
local ids, ats, amounts = short_entries()
local short_departures = {}
for i = 1, #ids do
  if ids[i] ~= hold then
    short_departures[#short_departures + 1] = { ats[i] + window_ms, amounts[i], 1 }
  end
end
local short_room = earliest_room(short_total - short_held + ext_tokens + cost - limit_tokens,
  count - short_held_requests + ext_requests + 1 - limit_requests, short_departures,
  ext_until, ext_tokens, ext_requests, t) or (t + window_ms)
if short_room > room then room = short_room end
if sends >= limit_send then
  local times = redis.call('ZRANGE', sent, 0, -1, 'WITHSCORES')
  local send_room = tonumber(times[2 * (sends - limit_send) + 2]) + SEND_WINDOW_MS
  if send_room > room then room = send_room end
end
return {'deferred', room, 0}
