-- Queues jobs idempotently. ARGV: prefix, job count, then JOB_ARGS entries per job (see
-- enqueue_at). Returns the count newly queued.
local queued = 0
for i = 0, tonumber(ARGV[2]) - 1 do
  queued = queued + enqueue_at(3 + i * JOB_ARGS, false)
end
return queued
