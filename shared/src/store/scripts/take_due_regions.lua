-- Takes the regions whose roll-up is due, clearing the marks. KEYS[1]: the due set.
local regions = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
return regions
