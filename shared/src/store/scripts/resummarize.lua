-- Queues one job again for an operator who wants its ticket summarized again. ARGV:
-- prefix, then the job's JOB_ARGS entries (see enqueue_at). Returns 'stale' when the
-- ticket's latest version is not the job's, 'already_llm' when that version's LLM
-- summary is stored, 'in_flight' when the job is leased, else 'queued': a pending job of
-- the same id is taken out and the job queued anew, and a degraded fallback of the
-- version (rank 1) drops to rank 0, no longer final, so that the call is made.
local id, ticket, version, kind = ARGV[2], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local stored = tonumber(redis.call('HGET', key('ticket', ticket), 'version'))
if not stored or stored ~= version then
  return 'stale'
end
local s = redis.call('HMGET', key('summary', ticket), kind .. ':version', kind .. ':rank')
local same_version = tonumber(s[1]) == version
if same_version and tonumber(s[2]) == 2 then
  return 'already_llm'
end
local f = redis.call('HMGET', job_key(id), 'tier', 'rank', 'co', 'token')
if f[4] then
  return 'in_flight'
end
if f[1] then
  remove_pending(id, f[1], f[2], f[3])
  forget(id)
end
if same_version and tonumber(s[2]) == 1 then
  redis.call('HSET', key('summary', ticket), kind .. ':rank', 0)
end
enqueue_at(2, false)
return 'queued'
