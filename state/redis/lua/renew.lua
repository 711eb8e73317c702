-- Extend the leases of live claims and queued waiters. ARGV (after the
-- common header): waiter lease ms, claim count, claim ids..., waiter ids...
-- Lapsed (purged) entries are not brought back. Returns how many were held.
local now = now_ms()
local exp, wexp = now + LEASE, now + tonumber(ARG[1])
local n = tonumber(ARG[2])
local held = 0
for i = 3, #ARG do
  local key, e = K_LEASES, exp
  if i > 2 + n then key, e = K_WLEASES, wexp end
  if redis.call('ZSCORE', key, ARG[i]) then
    redis.call('ZADD', key, e, ARG[i])
    held = held + 1
  end
end
return held
