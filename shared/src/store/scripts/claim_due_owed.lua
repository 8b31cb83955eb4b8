-- Claims up to `limit` owed deliveries of a kind due at `now`, earliest first: each moves
-- to the hold's end. KEYS[1]: the kind's owed set. ARGV: prefix, now, hold_until, limit.
-- Returns the job ids claimed.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], id)
end
return due
