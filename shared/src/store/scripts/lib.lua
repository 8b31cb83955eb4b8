-- Shared by every stormgate store script: concatenated in front of each one.
-- ARGV[1] is always the namespace prefix "{ns}"; the key layout is documented in
-- store/redis.rs. Numbers that must stay exact (times, scores) travel as strings
-- computed by the caller, never formatted by Lua.

local P = ARGV[1]

local function key(...)
  return P .. ':' .. table.concat({ ... }, ':')
end

local function job_key(id)
  return key('job', id)
end

-- Byte order, as Redis orders equal-score members; Lua's `<` would follow the
-- server's collation locale instead.
local function bytes_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local function add_coalescing(id, tier, enq, co)
  if co ~= '' then
    redis.call('ZADD', key('coalesce', tier, co), enq, id)
  end
end

-- Into its (tier, severity) queue, where it may lead a group.
local function add_to_queue(id, tier, rank, enq)
  redis.call('ZADD', key('pending', tier, rank), enq, id)
end

local function add_pending(id, tier, rank, enq, co)
  add_to_queue(id, tier, rank, enq)
  add_coalescing(id, tier, enq, co)
end

-- A held job is in its tier's held set (not yet in its queue) and in its coalescing
-- set; removing it from both kinds of set covers either state.
local function remove_pending(id, tier, rank, co)
  redis.call('ZREM', key('pending', tier, rank), id)
  redis.call('ZREM', key('held', tier), id)
  if co ~= '' then
    redis.call('ZREM', key('coalesce', tier, co), id)
  end
end

-- Deletes a job that is not pending (leased, or just taken out of its queue).
local function forget(id)
  local f = redis.call('HMGET', job_key(id), 'ticket', 'tier', 'token')
  if not f[1] then
    return
  end
  if f[3] then
    redis.call('ZREM', key('leased', f[2]), id)
  end
  redis.call('SREM', key('ticket_jobs', f[1]), id)
  redis.call('DEL', job_key(id))
end

-- Queues one job described by 10 consecutive ARGV entries starting at `at`:
-- id, json, ticket, version, kind, tier, rank, enqueued_at, coalesce key ('' for none),
-- hold end ('' for none). A held job waits in the tier's held set, and in its
-- coalescing set (so that it can join a group), until `end_holds` queues it.
-- Returns 1 if queued, 0 if the job already exists.
local JOB_ARGS = 10

local function enqueue_at(at, skip_technician)
  local id, ticket, kind = ARGV[at], ARGV[at + 2], ARGV[at + 4]
  local tier, rank, enq, co = ARGV[at + 5], ARGV[at + 6], ARGV[at + 7], ARGV[at + 8]
  local hold = ARGV[at + 9]
  if skip_technician and kind == 'technician' then
    return 0
  end
  if redis.call('EXISTS', job_key(id)) == 1 then
    return 0
  end
  redis.call('HSET', job_key(id), 'json', ARGV[at + 1], 'ticket', ticket, 'version', ARGV[at + 3],
    'kind', kind, 'tier', tier, 'rank', rank, 'enq', enq, 'co', co)
  redis.call('SADD', key('ticket_jobs', ticket), id)
  if hold ~= '' then
    redis.call('ZADD', key('held', tier), hold, id)
    add_coalescing(id, tier, enq, co)
  else
    add_pending(id, tier, rank, enq, co)
  end
  return 1
end

-- Queues the held jobs of `tier` whose hold has ended at `now` (a string of epoch ms).
local function end_holds(tier, now)
  local held = key('held', tier)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', held, '-inf', now)) do
    local f = redis.call('HMGET', job_key(id), 'rank', 'enq')
    add_to_queue(id, tier, f[1], f[2])
  end
  redis.call('ZREMRANGEBYSCORE', held, '-inf', now)
end

-- Latest summary per (ticket, kind): a newer version wins; at the same version a
-- higher rank (Summary::standing: instant 0, degraded extractive 1, LLM 2) wins. Returns 1 if stored.
local function put_summary(ticket, kind, version, rank, json)
  local k = key('summary', ticket)
  local current = redis.call('HMGET', k, kind .. ':version', kind .. ':rank')
  if current[1] then
    local cv, cr = tonumber(current[1]), tonumber(current[2])
    if tonumber(version) ~= cv then
      if tonumber(version) < cv then
        return 0
      end
    elseif tonumber(rank) <= cr then
      return 0
    end
  end
  redis.call('HSET', k, kind, json, kind .. ':version', version, kind .. ':rank', rank)
  return 1
end

-- Removes pending jobs of `ticket` below `below` whose kind is in the set `kinds`;
-- leased ones are marked so that release and reclaim drop them. Returns the count removed.
local function cancel(ticket, below, kinds)
  local removed = 0
  for _, id in ipairs(redis.call('SMEMBERS', key('ticket_jobs', ticket))) do
    local f = redis.call('HMGET', job_key(id), 'version', 'kind', 'tier', 'rank', 'co', 'token')
    if f[1] and tonumber(f[1]) < below and kinds[f[2]] then
      if f[6] then
        redis.call('HSET', job_key(id), 'cancelled', '1')
      else
        remove_pending(id, f[3], f[4], f[5])
        forget(id)
        removed = removed + 1
      end
    end
  end
  return removed
end

-- Ends the lease on `id` and queues the job again, in `new_tier` if given, keeping its
-- arrival time; a job cancelled meanwhile is dropped. Returns 1 if queued again.
local function requeue(id, new_tier)
  local f = redis.call('HMGET', job_key(id), 'tier', 'rank', 'enq', 'co', 'token', 'cancelled')
  if not f[5] then
    return 0
  end
  if f[6] then
    forget(id)
    return 0
  end
  local tier = new_tier or f[1]
  redis.call('ZREM', key('leased', f[1]), id)
  redis.call('HDEL', job_key(id), 'token', 'exp')
  redis.call('HSET', job_key(id), 'tier', tier)
  add_pending(id, tier, f[2], f[3], f[4])
  return 1
end

