-- The first `limit` pending jobs of a tier in serve order, without leasing them.
-- ARGV: prefix, tier, limit, promote_every_ms. Returns {json1, json2, ...}.
local tier, limit, step = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

-- Each severity's queue is ordered by arrival, so the first `limit` of each hold the
-- first `limit` overall; merge them by (arrival + (rank-1) x step, arrival, id).
local all = {}
for rank = 1, 5 do
  local head = redis.call('ZRANGE', key('pending', tier, rank), 0, limit - 1, 'WITHSCORES')
  for i = 1, #head, 2 do
    local enq = tonumber(head[i + 1])
    all[#all + 1] = { id = head[i], enq = enq, score = enq + (rank - 1) * step }
  end
end
table.sort(all, function(a, b)
  if a.score ~= b.score then return a.score < b.score end
  if a.enq ~= b.enq then return a.enq < b.enq end
  return bytes_less(a.id, b.id)
end)
local out = {}
for i = 1, math.min(limit, #all) do
  out[i] = redis.call('HGET', job_key(all[i].id), 'json')
end
return out
