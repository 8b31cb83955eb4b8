-- Deletes tickets whose retention ended. ARGV: prefix, now (epoch ms), limit.
-- Returns {tickets purged, 1 if more were due than the limit else 0}.
local due = redis.call('ZRANGEBYSCORE', key('expiry'), '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]) + 1)
local limit = tonumber(ARGV[3])
local purged = 0
for i, ticket in ipairs(due) do
  if i > limit then
    break
  end
  local ticket_key = key('ticket', ticket)
  local region = redis.call('HGET', ticket_key, 'region')
  if region then
    redis.call('ZREM', key('region_tickets', region), ticket)
    redis.call('ZREM', key('region_expiry', region), ticket)
  end
  cancel(ticket, math.huge, { technician = true, customer = true, rollup = true })
  if redis.call('SCARD', key('ticket_jobs', ticket)) == 0 then
    redis.call('DEL', key('ticket_jobs', ticket))
  end
  local number = redis.call('HGET', ticket_key, 'number')
  if number and redis.call('GET', key('number', number)) == ticket then
    redis.call('DEL', key('number', number))
  end
  redis.call('DEL', ticket_key, key('summary', ticket))
  redis.call('ZREM', key('expiry'), ticket)
  purged = purged + 1
end
return { purged, #due > limit and 1 or 0 }
