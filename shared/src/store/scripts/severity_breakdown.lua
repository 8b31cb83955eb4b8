-- One tier's jobs per severity. ARGV: prefix, tier, head, scan cap. Returns
-- {pending counts by rank, {per rank the JSON of the `head` oldest pending jobs},
--  held counts by rank, leased counts by rank}; held and leased jobs beyond the scan cap
-- are not counted.
local tier, head, cap = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local pending, oldest = {}, {}
for rank = 1, 5 do
  local queue = key('pending', tier, rank)
  pending[rank] = redis.call('ZCARD', queue)
  local jobs = {}
  if head > 0 then
    for _, id in ipairs(redis.call('ZRANGE', queue, 0, head - 1)) do
      local json = redis.call('HGET', job_key(id), 'json')
      if json then
        jobs[#jobs + 1] = json
      end
    end
  end
  oldest[rank] = jobs
end
local function per_rank(set)
  local counts = { 0, 0, 0, 0, 0 }
  for _, id in ipairs(redis.call('ZRANGE', key(set, tier), 0, cap - 1)) do
    local rank = tonumber(redis.call('HGET', job_key(id), 'rank'))
    if rank and counts[rank] then
      counts[rank] = counts[rank] + 1
    end
  end
  return counts
end
return { pending, oldest, per_rank('held'), per_rank('leased') }
