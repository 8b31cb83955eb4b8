-- Stores a summary unless a better one is stored. ARGV: prefix, ticket, kind, version,
-- rank, json, and the key's expiry in ms (0: none). Returns 1 if stored, 0 if superseded.
-- A summary hash written after its ticket's keys expired gets the expiry the ticket's
-- keys have.
local stored = put_summary(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
local ttl = tonumber(ARGV[7] or '0')
if stored == 1 and ttl and ttl > 0 then
  local k = key('summary', ARGV[2])
  if redis.call('PTTL', k) == -1 then
    redis.call('PEXPIRE', k, ttl)
  end
end
return stored
