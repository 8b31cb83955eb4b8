-- Shared prelude of every governor script. KEYS: 1 state hash, 2 log zset of the last
-- minute (member = reservation id, score = admitted at), 3 charges hash (id -> tokens),
-- 4 reconciled set, 5 log zset of the short window (a subset of 2), 6 zset of the calls sent
-- in the last second (member = reservation id, score = sent at). Moves the ledger's
-- timeline to max(now, latest now seen) and drops the entries that left each window,
-- keeping both running token totals exact: every entry enters and leaves each log once,
-- so no admission walks the window.
local state, window, charges, reconciled, short = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sent = KEYS[6]
local MINUTE_MS = 60000
local SEND_WINDOW_MS = 1000

-- Drops the entries of `zset` admitted at or before `cutoff`, subtracting their charges
-- from `total`; `forget` also deletes their charges (they leave the ledger for good).
local function expire(zset, cutoff, total, forget)
  local old = redis.call('ZRANGEBYSCORE', zset, '-inf', cutoff)
  if #old == 0 then return total end
  -- unpack() is bounded by Lua's stack: work in chunks
  for i = 1, #old, 500 do
    local chunk = {}
    for j = i, math.min(i + 499, #old) do chunk[#chunk + 1] = old[j] end
    local amounts = redis.call('HMGET', charges, unpack(chunk))
    for k = 1, #amounts do total = total - (tonumber(amounts[k]) or 0) end
    if forget then
      redis.call('HDEL', charges, unpack(chunk))
      redis.call('SREM', reconciled, unpack(chunk))
      local marks = {}
      for j = 1, #chunk do marks[j] = 's:' .. chunk[j] end
      redis.call('SREM', reconciled, unpack(marks))
    end
  end
  redis.call('ZREMRANGEBYSCORE', zset, '-inf', cutoff)
  if total < 0 then total = 0 end
  return total
end

local function advance(now, window_ms)
  local f = redis.call('HMGET', state, 'latest_now', 'minute_tokens', 'short_tokens')
  local t = now
  local latest = tonumber(f[1]) or 0
  if latest > t then t = latest end
  -- The short window first: its entries' charges are still there.
  local short_total = expire(short, t - window_ms, tonumber(f[3]) or 0, false)
  local minute_total = expire(window, t - MINUTE_MS, tonumber(f[2]) or 0, true)
  redis.call('ZREMRANGEBYSCORE', sent, '-inf', t - SEND_WINDOW_MS)
  redis.call('HSET', state, 'latest_now', t, 'minute_tokens', minute_total, 'short_tokens', short_total)
  return t, minute_total, short_total
end

-- The short window's entries, oldest first: {ids}, {admitted at}, {charges}. Only a
-- deferral needs them.
local function short_entries()
  local entries = redis.call('ZRANGE', short, 0, -1, 'WITHSCORES')
  local ids, ats = {}, {}
  for i = 1, #entries, 2 do
    ids[#ids + 1] = entries[i]
    ats[#ats + 1] = tonumber(entries[i + 1])
  end
  local amounts = {}
  if #ids > 0 then
    local raw = redis.call('HMGET', charges, unpack(ids))
    for k = 1, #raw do amounts[k] = tonumber(raw[k]) or 0 end
  end
  return ids, ats, amounts
end

-- The external reservation in force at t: tokens, requests, and its end. It is held
-- against the minute and the short window alike (see the ledger rules).
local function external(t)
  local f = redis.call('HMGET', state, 'ext_tokens', 'ext_requests', 'ext_until')
  local ext_until = tonumber(f[3]) or 0
  if ext_until > t then return tonumber(f[1]) or 0, tonumber(f[2]) or 0, ext_until end
  return 0, 0, ext_until
end

-- What could be admitted at t without waiting: tokens, requests, and the short
-- window's request count.
local function free(t, limit_tokens, limit_requests, limit_minute, minute_total, short_total)
  local ext_tokens, ext_requests = external(t)
  local count = redis.call('ZCARD', short)
  local tokens = math.min(limit_tokens - short_total - ext_tokens,
    limit_minute - minute_total - ext_tokens)
  local requests = limit_requests - count - ext_requests
  if tokens < 0 then tokens = 0 end
  if requests < 0 then requests = 0 end
  return tokens, requests, count
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
