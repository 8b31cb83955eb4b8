-- Returns leases expired at `now` to their queues. ARGV: prefix, now.
-- Returns the count re-queued.
local requeued = 0
for _, tier in ipairs({ 'premium', 'standard', 'extractive' }) do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', key('leased', tier), '-inf', ARGV[2])) do
    requeued = requeued + requeue(id, nil)
  end
end
return requeued
