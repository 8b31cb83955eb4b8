-- Ends deliveries: each job leaves its kind's owed set, and its version is recorded as
-- delivered in the ticket's summary hash (only while that hash exists: a mark never
-- outlives the summaries it is about). ARGV: prefix, then (kind, job id, ticket, version)
-- quadruples. Returns the count that were owed.
local completed = 0
for i = 2, #ARGV, 4 do
  local kind, id, ticket, version = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  completed = completed + redis.call('ZREM', key('owed', kind), id)
  local summaries = key('summary', ticket)
  local field = kind .. ':delivered'
  if redis.call('EXISTS', summaries) == 1 then
    local current = redis.call('HGET', summaries, field)
    if not current or tonumber(current) < tonumber(version) then
      redis.call('HSET', summaries, field, version)
    end
  end
end
return completed
