-- Drop claims this replica already released, where the release was lost:
-- after a failover the promoted replica may lack the last writes the old
-- master acknowledged. ARGV (after the common header): claim ids. A claim
-- id is never reused, so one that is still held after its release is a
-- leftover: it is dropped (no averages, those went with the release) and
-- its slot handed to a waiter. Returns how many were dropped.
local now = now_ms()
local dropped = 0
local freed = {}
for i = 1, #ARG do
  local id = ARG[i]
  local w = redis.call('HGET', K_CLAIMS, id)
  if w then
    redis.call('HDEL', K_CLAIMS, id)
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_GRANTS, id)
    dec(w, id)
    freed[w] = true
    dropped = dropped + 1
  end
end
for w in pairs(freed) do pump_worker(w, now) end
return dropped
