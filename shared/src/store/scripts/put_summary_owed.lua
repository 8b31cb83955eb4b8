-- Stores a summary unless a better one is stored and, when it is stored and a delivery
-- is owed for it, adds its job to the kind's owed set (unless that version was delivered
-- or is owed already). KEYS[1]: the ticket's summary hash. ARGV: prefix, ticket, kind,
-- version, rank, json, owes ('1'/'0'), now, job id. Returns 1 if stored, 0 if superseded.
local stored = put_summary(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if stored == 1 and ARGV[7] == '1' then
  local delivered = redis.call('HGET', KEYS[1], ARGV[3] .. ':delivered')
  if not delivered or tonumber(delivered) < tonumber(ARGV[4]) then
    redis.call('ZADD', key('owed', ARGV[3]), 'NX', ARGV[8], ARGV[9])
  end
end
return stored
