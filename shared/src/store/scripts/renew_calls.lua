-- Extends the running claims a holder holds. ARGV: prefix, holder, now, until, job ids.
-- Returns the count extended.
local holder, now, till = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ttl = math.max(tonumber(till) - now, 1)
local renewed = 0
for i = 5, #ARGV do
  local call = key('call', ARGV[i])
  local held = redis.call('HMGET', call, 'holder', 'until')
  if held[1] == holder and tonumber(held[2]) > now then
    redis.call('HSET', call, 'until', till)
    redis.call('PEXPIRE', call, ttl)
    renewed = renewed + 1
  end
end
return renewed
