-- Applies one ingest record atomically.
-- KEYS[1]: the ticket hash. ARGV: prefix, ticket, version, snapshot json, closed ('1'/'0'),
-- region ('' for none), summary kind, summary version, summary rank, summary json,
-- job count, then 9 entries per job (see enqueue_at).
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
  enqueue_at(12 + i * 9, closed)
end
if ARGV[6] ~= '' then
  redis.call('SADD', key('rollup_due'), ARGV[6])
end
return 'accepted'
