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

-- The external reservation in force at t: tokens, requests, and its end. It is held
-- against the minute and the short window alike (see the ledger rules).
local function external(t)
  local f = redis.call('HMGET', state, 'ext_tokens', 'ext_requests', 'ext_until')
  local ext_until = tonumber(f[3]) or 0
  if ext_until > t then return tonumber(f[1]) or 0, tonumber(f[2]) or 0, ext_until end
  return 0, 0, ext_until
end

-- What could be admitted at t without waiting: tokens, requests; plus the short
-- window's entries (ids, admitted at, charges) for callers that need them.
local function free(t, window_ms, limit_tokens, limit_requests, limit_minute, minute_total)
  local ext_tokens, ext_requests = external(t)
  local ids, ats, amounts, short_total = short_window(t, window_ms)
  local tokens = math.min(limit_tokens - short_total - ext_tokens,
    limit_minute - minute_total - ext_tokens)
  local requests = limit_requests - #ids - ext_requests
  if tokens < 0 then tokens = 0 end
  if requests < 0 then requests = 0 end
  return tokens, requests, ids, ats, amounts, short_total
end

-- The first instant at which departures ({at, tokens, requests}, in time order), taken
-- together with the external reservation leaving at ext_until, bring both excesses to
-- zero or below; t if they already are, nil if they never do.
local function earliest_room(excess_tokens, excess_requests, departures, ext_until, ext_tokens, ext_requests, t)
  if excess_tokens <= 0 and excess_requests <= 0 then return t end
  local held = ext_tokens > 0 or ext_requests > 0
  for i = 1, #departures do
    local d = departures[i]
    if held and ext_until <= d[1] then
      held = false
      excess_tokens = excess_tokens - ext_tokens
      excess_requests = excess_requests - ext_requests
      if excess_tokens <= 0 and excess_requests <= 0 then return ext_until end
    end
    excess_tokens = excess_tokens - d[2]
    excess_requests = excess_requests - d[3]
    if excess_tokens <= 0 and excess_requests <= 0 then return d[1] end
  end
  if held then
    excess_tokens = excess_tokens - ext_tokens
    excess_requests = excess_requests - ext_requests
    if excess_tokens <= 0 and excess_requests <= 0 then return ext_until end
  end
  return nil
end
