-- Extend the leases of live claims and queued waiters. ARGV (after the
-- common three): waiter lease ms, claim count, claim ids..., waiter ids...
-- Lapsed (purged) entries are not brought back. Returns how many were held.
local now = now_ms()
local exp, wexp = now + LEASE, now + tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local held = 0
for i = 6, #ARGV do
  local key, e = K_LEASES, exp
  if i > 5 + n then key, e = K_WLEASES, wexp end
  if redis.call('ZSCORE', key, ARGV[i]) then
    redis.call('ZADD', key, e, ARGV[i])
    held = held + 1
  end
end
return held
