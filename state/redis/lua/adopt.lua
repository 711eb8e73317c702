-- Reconcile after a store outage: make sure each claim this replica holds is
-- counted once. ARGV (after the common header): (claim id, worker) pairs. A
-- claim Redis still has is renewed (and moved if it changed worker); one it
-- lost (lapsed during the outage, or made while Redis was unreachable) is
-- added back. Returns how many were added.
local now = now_ms()
purge(now)
local added = 0
for i = 1, #ARG, 2 do
  local id, w = ARG[i], ARG[i + 1]
  if redis.call('HEXISTS', K_WORKERS, w) == 1 then
    local cur = redis.call('HGET', K_CLAIMS, id)
    if not cur then
      inc(w)
      redis.call('HSET', K_CLAIMS, id, w)
      added = added + 1
    elseif cur ~= w then
      dec(cur, id) -- its tokens go: they counted on the wrong worker
      inc(w)
      redis.call('HSET', K_CLAIMS, id, w)
    end
    redis.call('ZADD', K_LEASES, now + LEASE, id)
  end
end
return added
