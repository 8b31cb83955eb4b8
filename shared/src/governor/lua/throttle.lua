-- ARGV: field (cooldown_until | down_until), the new until. Extends, never shortens;
-- answers the resulting new_until.
local field, new_until = ARGV[1], tonumber(ARGV[2])
redis.call('HINCRBY', state, 'throttles', 1)
local current = tonumber(redis.call('HGET', state, field)) or 0
if new_until > current then
  redis.call('HSET', state, field, new_until)
  return new_until
end
return current
