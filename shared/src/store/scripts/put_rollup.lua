-- Stores a region's roll-up unless a better one is stored (the summary rule, kind
-- `rollup`). ARGV: prefix, region key, version, rank, json, and the key's expiry in ms
-- (0: none). Returns 1 if stored, 0 if superseded. Every roll-up stored restarts the
-- expiry of the region's summary hash, so a region no longer rolled up goes.
local stored = put_summary(ARGV[2], 'rollup', ARGV[3], ARGV[4], ARGV[5])
local ttl = tonumber(ARGV[6] or '0')
if stored == 1 and ttl and ttl > 0 then
  redis.call('PEXPIRE', key('summary', ARGV[2]), ttl)
end
return stored
