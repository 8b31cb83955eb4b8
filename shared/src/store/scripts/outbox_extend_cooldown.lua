-- Extends the fleet-wide ServiceNow cooldown KEYS[1] to ARGV[1] (epoch ms), never
-- shortening it; the key expires ARGV[2] ms later, with the cooldown.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
