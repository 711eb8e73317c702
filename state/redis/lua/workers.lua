-- Registered workers' leases. ARG: op, id, lease ms.
--   lease: start or extend the lease of a registered worker (after
--          register.lua put it in the registry), marking it registered. A
--          worker registers as it starts: its prefix index goes.
--   beat:  extend it; an error for a worker that is not registered.
--   drop:  deregister it (config workers too, until a replica restarts).
-- Returns the lease expiry in ms (0 for drop).
local op, id, ttl = ARG[1], ARG[2], tonumber(ARG[3])
local now = now_ms()
if op == 'drop' then
  if not deregister(id) then return redis.error_reply('unknown worker') end
  return 0
end
if redis.call('HEXISTS', K_WORKERS, id) == 0 then return redis.error_reply('unknown worker') end
if op == 'beat' and not redis.call('ZSCORE', K_WKLEASES, id) then
  return redis.error_reply('unknown worker: not registered through the API (it has no lease)')
end
if op == 'lease' then forget_prefixes(id) end
redis.call('ZADD', K_WKLEASES, now + ttl, id)
redis.call('HSET', K_SOURCE, id, 'registered')
return now + ttl
