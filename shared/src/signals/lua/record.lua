-- Adds one batch of signals to the minute and the day it belongs to, and trims what the
-- horizon left behind, in one step. Keys share the namespace's hash tag (ARGV[1]).
-- ARGV: prefix, minute, day, now, minute_drop_at, day_drop_at, ttl_ms, day_ttl_ms, then the counts of counters, maxima, usage counters and lag entries, the
-- fleet configuration ('' for none), and the entries: (field, n) pairs for counters,
-- maxima and usage, (field, drop_at, json) triples for lag.
-- Index `sig:index`: every kept bucket, day and lag entry, scored by the instant (on the
-- product's clock) it is dropped; each write drops at most 500 that are due.
local P = ARGV[1]
local function key(...)
  return P .. ':' .. table.concat({ ... }, ':')
end
local minute, day, now = ARGV[2], ARGV[3], tonumber(ARGV[4])
local minute_drop, day_drop = ARGV[5], ARGV[6]
local ttl, day_ttl = tonumber(ARGV[7]), tonumber(ARGV[8])
local nc, nm, nu, nl = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local config = ARGV[13]
local index = key('sig', 'index')
local i = 14

if nc + nm > 0 then
  local mk = key('sig', 'm', minute)
  for _ = 1, nc do
    redis.call('HINCRBY', mk, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  for _ = 1, nm do
    local current = redis.call('HGET', mk, ARGV[i])
    if not current or tonumber(ARGV[i + 1]) > tonumber(current) then
      redis.call('HSET', mk, ARGV[i], ARGV[i + 1])
    end
    i = i + 2
  end
  redis.call('ZADD', index, minute_drop, 'm:' .. minute)
  redis.call('PEXPIRE', mk, ttl)
end

if nu > 0 then
  local dk = key('sig', 'd', day)
  for _ = 1, nu do
    redis.call('HINCRBY', dk, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  redis.call('ZADD', index, day_drop, 'd:' .. day)
  redis.call('PEXPIRE', dk, day_ttl)
end

if nl > 0 then
  local lk = key('sig', 'lag')
  for _ = 1, nl do
    redis.call('HSET', lk, ARGV[i], ARGV[i + 2])
    redis.call('ZADD', index, ARGV[i + 1], 'l:' .. ARGV[i])
    i = i + 3
  end
  redis.call('PEXPIRE', lk, ttl)
end

if config ~= '' then
  redis.call('SET', key('sig', 'config'), config)
end

local due = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 500)
for _, member in ipairs(due) do
  local kind, rest = string.sub(member, 1, 1), string.sub(member, 3)
  if kind == 'm' then
    redis.call('DEL', key('sig', 'm', rest))
  elseif kind == 'd' then
    redis.call('DEL', key('sig', 'd', rest))
  elseif kind == 'l' then
    redis.call('HDEL', key('sig', 'lag'), rest)
  end
  redis.call('ZREM', index, member)
end
redis.call('PEXPIRE', index, day_ttl)
return #due
