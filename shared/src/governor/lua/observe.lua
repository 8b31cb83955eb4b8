-- ARGV: now, window_ms, limit_tokens, limit_requests, reported remaining tokens,
-- reported remaining requests (each '' when the deployment did not say).
-- When the deployment reports less than the window has free, the external
-- reservation grows so that exactly the reported amount is free, until t + window_ms.
-- Answers the external reservation in force: {tokens, requests, ext_until}.
local window_ms = tonumber(ARGV[2])
local t, total = advance(tonumber(ARGV[1]), window_ms)
local limit_tokens, limit_requests = tonumber(ARGV[3]), tonumber(ARGV[4])
local reported_tokens, reported_requests = tonumber(ARGV[5]), tonumber(ARGV[6])
local ext_tokens, ext_requests = external(t)
local count = redis.call('ZCARD', window)

-- The external reservation that leaves exactly `remaining` free, if larger than held.
local function needed(limit, charged, held, remaining)
  if remaining == nil then return nil end
  local free = limit - charged
  if free < 0 then free = 0 end
  local n = free - remaining
  if n > held then return n end
  return nil
end

local new_tokens = needed(limit_tokens, total, ext_tokens, reported_tokens)
local new_requests = needed(limit_requests, count, ext_requests, reported_requests)
if new_tokens ~= nil or new_requests ~= nil then
  ext_tokens = new_tokens or ext_tokens
  ext_requests = new_requests or ext_requests
  redis.call('HSET', state, 'ext_tokens', ext_tokens, 'ext_requests', ext_requests,
    'ext_until', t + window_ms)
  redis.call('HINCRBY', state, 'shortfalls', 1)
end
local tokens, requests, ext_until = external(t)
return {tokens, requests, ext_until}
