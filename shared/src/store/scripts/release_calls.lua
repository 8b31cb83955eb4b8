-- Drops the claims a holder holds. ARGV: prefix, holder, job ids. Returns the count dropped.
local released = 0
for i = 3, #ARGV do
  local call = key('call', ARGV[i])
  if redis.call('HGET', call, 'holder') == ARGV[2] then
    redis.call('DEL', call)
    released = released + 1
  end
end
return released
