-- Shared by state.lua and change.lua, which define `key` and `cap` before it.
-- Appends an audit entry, trimming the stream to its cap and counting what the cap
-- dropped (`audit:trimmed`), so a trimmed audit is never silent.
local function append_audit(...)
  local before = redis.call('XLEN', key('audit'))
  local id = redis.call('XADD', key('audit'), 'MAXLEN', cap, '*', ...)
  local trimmed = before + 1 - tonumber(cap)
  if trimmed > 0 then
    redis.call('INCRBY', key('audit', 'trimmed'), trimmed)
  end
  return id
end
