-- Atomic pick-and-claim. ARGV: prefix, claim id, lease ms, candidates as
-- one MessagePack array {ids, caps, bases, slopes, mults} (one decode in C
-- instead of five arguments a candidate). Evaluates every candidate's curve
-- (base + slope*a) * (1 + mult*a) at its live in-flight count a, skips
-- workers that are full, unhealthy or draining, and claims the lowest
-- (ties: the earlier candidate). Mirrors scoring.Pick.
-- Returns {index (1-based, -1: none), {live counts}, {1 if available}}.
local id, lease = ARGV[2], tonumber(ARGV[3])
local c = cmsgpack.unpack(ARGV[4])
local ids, caps, bases, slopes, mults = c[1], c[2], c[3], c[4], c[5]
local now = now_ms()
purge(now)
if redis.call('HEXISTS', K_CLAIMS, id) == 1 then
  return redis.error_reply('claim already held')
end
local inflight = redis.call('HMGET', K_INFLIGHT, unpack(ids))
local ok = redis.call('HMGET', K_OK, unpack(ids))
local best, bestScore = -1, 0
local active, avail = {}, {}
for i = 1, #ids do
  local a = tonumber(inflight[i]) or 0
  active[i] = a
  if ok[i] then
    avail[i] = 1
    if a < caps[i] then
      local s = (bases[i] + slopes[i] * a) * (1 + mults[i] * a)
      if best < 0 or s < bestScore then
        best, bestScore = i, s
      end
    end
  else
    avail[i] = 0
  end
end
if best > 0 then
  redis.call('HINCRBY', K_INFLIGHT, ids[best], 1)
  redis.call('HSET', K_CLAIMS, id, ids[best])
  redis.call('ZADD', K_LEASES, now + lease, id)
end
return {best, active, avail}
