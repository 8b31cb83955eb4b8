-- Shared prelude of every governor script. KEYS: 1 state hash, 2 window zset
-- (member = reservation id, score = admitted at), 3 charges hash (id -> tokens),
-- 4 reconciled set. Moves the ledger's timeline to max(now, latest now seen) and
-- drops the entries that left the window, keeping the running token total exact.
-- The state hash also holds the external reservation (ext_tokens, ext_requests,
-- ext_until) set by what the deployment reported it has left.
local state, window, charges, reconciled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local function advance(now, window_ms)
  local latest = tonumber(redis.call('HGET', state, 'latest_now')) or 0
  local t = now
  if latest > t then t = latest end
  local total = tonumber(redis.call('HGET', state, 'window_tokens')) or 0
  local cutoff = t - window_ms
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
  redis.call('HSET', state, 'latest_now', t, 'window_tokens', total)
  return t, total
end

-- The external reservation in force at t: tokens, requests, and its end.
local function external(t)
  local f = redis.call('HMGET', state, 'ext_tokens', 'ext_requests', 'ext_until')
  local ext_until = tonumber(f[3]) or 0
  if ext_until > t then return tonumber(f[1]) or 0, tonumber(f[2]) or 0, ext_until end
  return 0, 0, ext_until
end
