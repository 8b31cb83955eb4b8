-- Takes the earliest outbox member due at ARGV[1] and moves its due time to the hold's
-- end ARGV[2], atomically: of two instances draining at once, only one gets a member.
-- KEYS[1]: the outbox's pending set. Returns the member, or false when none is due.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1)
if #due == 0 then return false end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], due[1])
return due[1]
