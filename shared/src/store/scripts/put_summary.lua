-- Stores a summary unless a better one is stored. ARGV: prefix, ticket, kind, version,
-- rank, json. Returns 1 if stored, 0 if superseded.
return put_summary(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
