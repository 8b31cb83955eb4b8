-- Removes a leased job for good. KEYS[1]: the job hash. ARGV: prefix, job id, token.
-- Returns 1, or 0 if the token is not the lease currently held.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then
  return 0
end
forget(ARGV[2])
return 1
