-- Cancels pending jobs of a ticket below a version. KEYS[1]: the ticket's job set.
-- ARGV: prefix, ticket, below_version, kinds... Returns the count removed.
local kinds = {}
for i = 4, #ARGV do
  kinds[ARGV[i]] = true
end
return cancel(ARGV[2], tonumber(ARGV[3]), kinds)
