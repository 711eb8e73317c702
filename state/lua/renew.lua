-- Extend the leases of live claims. ARGV: prefix, lease ms, claim ids...
-- Lapsed (purged) claims are not brought back. Returns how many were held.
local exp = now_ms() + tonumber(ARGV[2])
local held = 0
for i = 3, #ARGV do
  if redis.call('ZSCORE', K_LEASES, ARGV[i]) then
    redis.call('ZADD', K_LEASES, exp, ARGV[i])
    held = held + 1
  end
end
return held
