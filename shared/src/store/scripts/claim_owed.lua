-- Claims the owed deliveries among the given jobs that are due: each moves to the hold's
-- end. ARGV: prefix, now, hold_until, then (kind, job id) pairs.
-- Returns the job ids claimed, in the order given.
local now = tonumber(ARGV[2])
local out = {}
for i = 4, #ARGV, 2 do
  local owed, id = key('owed', ARGV[i]), ARGV[i + 1]
  local due = redis.call('ZSCORE', owed, id)
  if due and tonumber(due) <= now then
    redis.call('ZADD', owed, 'XX', ARGV[3], id)
    table.insert(out, id)
  end
end
return out
