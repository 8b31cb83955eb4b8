-- ARGV: now, window_ms, limit_tokens, limit_requests, limit_minute_tokens, reported
-- remaining tokens, reported remaining requests (each '' when the deployment did not say).
-- When the deployment reports less than the ledger has free, the external
-- reservation grows so that exactly the reported amount is free, until t + window_ms.
-- Answers the external reservation in force: {tokens, requests, ext_until}.
local window_ms = tonumber(ARGV[2])
local t, minute_total, short_total = advance(tonumber(ARGV[1]), window_ms)
local limit_tokens, limit_requests, limit_minute = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local reported_tokens, reported_requests = tonumber(ARGV[6]), tonumber(ARGV[7])
local ext_tokens, ext_requests = external(t)
local free_tokens, free_requests =
  free(t, limit_tokens, limit_requests, limit_minute, minute_total, short_total)

-- The external reservation that leaves exactly `remaining` free, if larger than held.
local function needed(free_now, held, remaining)
  if remaining == nil then return nil end
  local n = free_now + held - remaining
  if n > held then return n end
  return nil
end

local new_tokens = needed(free_tokens, ext_tokens, reported_tokens)
local new_requests = needed(free_requests, ext_requests, reported_requests)
if new_tokens ~= nil or new_requests ~= nil then
  ext_tokens = new_tokens or ext_tokens
  ext_requests = new_requests or ext_requests
  redis.call('HSET', state, 'ext_tokens', ext_tokens, 'ext_requests', ext_requests,
    'ext_until', t + window_ms)
  redis.call('HINCRBY', state, 'shortfalls', 1)
end
local tokens, requests, ext_until = external(t)
return {tokens, requests, ext_until}
