-- Puts a leased job back as pending in a tier. KEYS[1]: the job hash.
-- ARGV: prefix, job id, token, tier. Returns 1, or 0 if the token is not the lease held.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then
  return 0
end
requeue(ARGV[2], ARGV[4])
return 1
