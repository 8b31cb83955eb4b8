-- Shared prelude of every governor script. KEYS: 1 state hash, 2 log zset
-- (member = reservation id, score = admitted at), 3 charges hash (id -> tokens),
-- 4 reconciled set. Moves the ledger's timeline to max(now, latest now seen) and
-- drops the entries older than a minute, keeping the minute's running token total exact.
local state, window, charges, reconciled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local MINUTE_MS = 60000

local function advance(now)
  local latest = tonumber(redis.call('HGET', state, 'latest_now')) or 0
  local t = now
  if latest > t then t = latest end
  local total = tonumber(redis.call('HGET', state, 'minute_tokens')) or 0
  local cutoff = t - MINUTE_MS
  local old = redis.call('ZRANGEBYSCORE', window, '-inf', cutoff)
  if #old > 0 then
    -- unpack() is bounded by Lua's stack: work in chunks
    for i = 1, #old, 500 do
      local chunk = {}
      for j = i, math.min(i + 499, #old) do chunk[#chunk + 1] = old[j] end
      local amounts = redis.call('HMGET', charges, unpack(chunk))
      for k = 1, #amounts do total = total - (tonumber(amounts[k]) or 0) end
      redis.call('HDEL', charges, unpack(chunk))
      redis.call('SREM', reconciled, unpack(chunk))
    end
    redis.call('ZREMRANGEBYSCORE', window, '-inf', cutoff)
    if total < 0 then total = 0 end
  end
  redis.call('HSET', state, 'latest_now', t, 'minute_tokens', total)
  return t, total
end

-- The entries admitted in (t - window_ms, t], oldest first: {ids}, {admitted at},
-- {charges}, and their token total.
local function short_window(t, window_ms)
  local entries = redis.call('ZRANGEBYSCORE', window, '(' .. (t - window_ms), '+inf', 'WITHSCORES')
  local ids, ats = {}, {}
  for i = 1, #entries, 2 do
    ids[#ids + 1] = entries[i]
    ats[#ats + 1] = tonumber(entries[i + 1])
  end
  local amounts, total = {}, 0
  if #ids > 0 then
    local raw = redis.call('HMGET', charges, unpack(ids))
    for k = 1, #raw do
      amounts[k] = tonumber(raw[k]) or 0
      total = total + amounts[k]
    end
  end
  return ids, ats, amounts, total
end
