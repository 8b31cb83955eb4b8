-- Applies one ingest record atomically.
-- KEYS[1]: the ticket hash. ARGV: prefix, ticket, version, snapshot json, closed ('1'/'0'),
-- region ('' for none), summary kind, summary version, summary rank, summary json,
-- job count, region index cap, then JOB_ARGS entries per job (see enqueue_at), then the
-- end of retention (epoch ms, '' to keep for ever), the keys' expiry in ms (0: none) and
-- the ticket's number ('' when it has none that can name a key).
-- Returns 'accepted', 'duplicate' or 'stale'.
local ticket, version = ARGV[2], tonumber(ARGV[3])
local stored = redis.call('HGET', KEYS[1], 'version')
if stored then
  if tonumber(stored) == version then
    return 'duplicate'
  end
  if tonumber(stored) > version then
    return 'stale'
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'snapshot', ARGV[4])
put_summary(ticket, ARGV[7], ARGV[8], ARGV[9], ARGV[10])
cancel(ticket, version, { technician = true, customer = true, rollup = true })
local closed = ARGV[5] == '1'
for i = 0, tonumber(ARGV[11]) - 1 do
  enqueue_at(13 + i * JOB_ARGS, closed)
end

-- File the ticket under its region, latest first, keeping the newest ARGV[12]. The
-- region the older version was filed under (the ticket hash keeps it even when the
-- index evicted the ticket) gets its roll-up marked due too: the ticket left it.
local region = ARGV[6]
local previous = redis.call('HGET', KEYS[1], 'region')
if previous and previous ~= region then
  redis.call('ZREM', key('region_tickets', previous), ticket)
  redis.call('SADD', key('rollup_due'), previous)
end
if region ~= '' then
  local index = key('region_tickets', region)
  redis.call('ZADD', index, redis.call('INCR', key('ingest_seq')), ticket)
  redis.call('ZREMRANGEBYRANK', index, 0, -(tonumber(ARGV[12]) + 1))
  redis.call('HSET', KEYS[1], 'region', region)
  redis.call('SADD', key('rollup_due'), region)
else
  redis.call('HDEL', KEYS[1], 'region')
end

-- Retention: the ticket joins the purge's index at its end of retention (the purge
-- also takes it out of its region's index), and its keys expire by themselves a grace
-- period later, so that they are bounded even where no purge runs.
local after_jobs = 13 + tonumber(ARGV[11]) * JOB_ARGS
local expire_at, ttl = ARGV[after_jobs], tonumber(ARGV[after_jobs + 1])
if expire_at and expire_at ~= '' then
  redis.call('ZADD', key('expiry'), expire_at, ticket)
end
if ttl and ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', key('summary', ticket), ttl)
  redis.call('PEXPIRE', key('ticket_jobs', ticket), ttl)
  if region ~= '' then
    redis.call('PEXPIRE', key('region_tickets', region), ttl)
  end
end

-- The ticket's number (INC...) names it for readers, for as long as its keys live.
local number = ARGV[after_jobs + 2]
if number and number ~= '' then
  local named = key('number', number)
  redis.call('SET', named, ticket)
  redis.call('HSET', KEYS[1], 'number', number)
  if ttl and ttl > 0 then
    redis.call('PEXPIRE', named, ttl)
  end
end
return 'accepted'
