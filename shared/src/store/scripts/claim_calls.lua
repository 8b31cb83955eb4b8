-- Claims the LLM calls of jobs for a holder. ARGV: prefix, holder, now, until, then
-- (job id, ticket, kind, version) quadruples. Per job, in order: 'done' when a final
-- summary of its version (rank >= 1) or of a newer one is stored; 'busy:<until>' when
-- another holder's claim runs past `now`; else 'claimed', the claim (re)set to `until`.
-- A claim key expires with its claim, so claims whose holder died do not accumulate.
local holder, now, till = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ttl = math.max(tonumber(till) - now, 1)
local out = {}
for i = 5, #ARGV, 4 do
  local id, ticket, kind, version = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local s = redis.call('HMGET', key('summary', ticket), kind .. ':version', kind .. ':rank')
  local sv = tonumber(s[1])
  if sv and (sv > version or (sv == version and tonumber(s[2]) >= 1)) then
    table.insert(out, 'done')
  else
    local call = key('call', id)
    local held = redis.call('HMGET', call, 'holder', 'until')
    if held[1] and held[1] ~= holder and tonumber(held[2]) > now then
      table.insert(out, 'busy:' .. held[2])
    else
      redis.call('HSET', call, 'holder', holder, 'until', till)
      redis.call('PEXPIRE', call, ttl)
      table.insert(out, 'claimed')
    end
  end
end
return out
