-- Leases the best pending job of a tier and up to max_group-1 jobs sharing its
-- coalescing key, held or not. KEYS[1]: the tier's leased set. ARGV: prefix, tier,
-- expires_at, max_group, promote_every_ms, now.
-- Returns {} or {json1, token1, json2, token2, ...}, best job first.
local tier, expires_at = ARGV[2], ARGV[3]
local max_group, step = tonumber(ARGV[4]), tonumber(ARGV[5])
end_holds(tier, ARGV[6])

-- Each severity's queue is ordered by arrival, so its head is its best job; the
-- best overall is the lowest (arrival + (rank-1) x step, arrival, id) among heads.
local best
for rank = 1, 5 do
  local head = redis.call('ZRANGE', key('pending', tier, rank), 0, 0, 'WITHSCORES')
  if head[1] then
    local enq = tonumber(head[2])
    local c = { id = head[1], enq = enq, score = enq + (rank - 1) * step }
    if not best or c.score < best.score
      or (c.score == best.score and (c.enq < best.enq or (c.enq == best.enq and bytes_less(c.id, best.id)))) then
      best = c
    end
  end
end
if not best then
  return {}
end

local group = { best.id }
local co = redis.call('HGET', job_key(best.id), 'co')
if co and co ~= '' and max_group > 1 then
  for _, id in ipairs(redis.call('ZRANGE', key('coalesce', tier, co), 0, max_group - 1)) do
    if id ~= best.id and #group < max_group then
      table.insert(group, id)
    end
  end
end

local seq = redis.call('INCR', key('lease_seq'))
local out = {}
for i, id in ipairs(group) do
  local f = redis.call('HMGET', job_key(id), 'rank', 'co', 'json')
  remove_pending(id, tier, f[1], f[2])
  local token = string.format('%d.%d', seq, i)
  redis.call('HSET', job_key(id), 'token', token, 'exp', expires_at)
  redis.call('ZADD', KEYS[1], expires_at, id)
  table.insert(out, f[3])
  table.insert(out, token)
end
return out
