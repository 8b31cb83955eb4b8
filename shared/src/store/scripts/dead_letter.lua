-- Appends a dead letter, trimming the stream to its cap and counting what was trimmed.
-- KEYS[1]: the stream. ARGV: prefix, cap (0: none), then field, value, ... Returns the id.
local cap = tonumber(ARGV[2])
local fields = {}
for i = 3, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local id = redis.call('XADD', KEYS[1], '*', unpack(fields))
if cap > 0 then
  local trimmed = redis.call('XTRIM', KEYS[1], 'MAXLEN', cap)
  if trimmed > 0 then
    redis.call('INCRBY', key('dead_letters_trimmed'), trimmed)
  end
end
return id
