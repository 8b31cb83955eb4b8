-- Queues jobs idempotently. ARGV: prefix, job count, then 9 entries per job (see
-- enqueue_at). Returns the count newly queued.
local queued = 0
for i = 0, tonumber(ARGV[2]) - 1 do
  queued = queued + enqueue_at(3 + i * 9, false)
end
return queued
