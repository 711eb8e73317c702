-- Atomic pick-and-claim, or a place in the model's queue. ARGV (after the
-- common header): claim id, candidates as one MessagePack array {ids, caps,
-- bases, slopes, mults}, model, queue (0/1), priority rank, queue allowance
-- for that rank, replica, waiter lease ms.
--
-- Waiters already queued at this priority or better are served first (a
-- freed slot goes to them before a newcomer). Otherwise every candidate's
-- curve (base + slope*a) * (1 + mult*a) is evaluated at its live in-flight
-- count a, workers that are full, unhealthy or draining are skipped, and
-- the lowest is claimed (ties: the earlier candidate); this mirrors
-- scoring.Pick. With nothing available the request queues, if the queue
-- has room for its priority; a non-batch request finding no room sheds the
-- newest batch waiter.
-- Returns {outcome (1 claimed, 2 queued, 3 queue full, 0 none available),
-- index (1-based, -1: none), {live counts}, {1 if available}, queue position}.
local id = ARG[1]
local c = cmsgpack.unpack(ARG[2])
local model, queue, rank, allow, replica, wlease =
  ARG[3], ARG[4] == '1', tonumber(ARG[5]), tonumber(ARG[6]), ARG[7], tonumber(ARG[8])
local ids, caps, bases, slopes, mults = c[1], c[2], c[3], c[4], c[5]
local now = now_ms()
purge(now)
if redis.call('HEXISTS', K_CLAIMS, id) == 1 or redis.call('HEXISTS', K_WAITERS, id) == 1 then
  return redis.error_reply('claim already held')
end
local q = qkey(model)
local ahead = false
if queue then
  pump_model(model, now)
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  ahead = head[1] ~= nil and tonumber(head[2]) < (rank + 1) * RANK_SPAN
end

-- Redis keeps a hash of up to hash-max-listpack-entries fields (512 in
-- 7.0) as a listpack, where HMGET finds each field by a scan: n candidates
-- of a hash of n workers cost n² (1.4 ms a claim at 512 workers). For
-- many candidates of such a hash, one HGETALL and a table lookup cost n.
local function hmget(key)
  if #ids > 16 and redis.call('HLEN', key) <= 512 then
    local flat, by, out = redis.call('HGETALL', key), {}, {}
    for i = 1, #flat, 2 do by[flat[i]] = flat[i + 1] end
    for i = 1, #ids do out[i] = by[ids[i]] or false end
    return out
  end
  return redis.call('HMGET', key, unpack(ids))
end
local inflight = hmget(K_INFLIGHT)
local ok = hmget(K_OK)
local best, bestScore = -1, 0
local active, avail = {}, {}
for i = 1, #ids do
  local a = tonumber(inflight[i]) or 0
  active[i] = a
  if ok[i] then
    avail[i] = 1
    if a < effective_cap(ok[i], caps[i]) then
      local s = (bases[i] + slopes[i] * a) * (1 + mults[i] * a)
      if best < 0 or s < bestScore then
        best, bestScore = i, s
      end
    end
  else
    avail[i] = 0
  end
end
if best > 0 and not ahead and global_room() then
  inc(ids[best])
  redis.call('HSET', K_CLAIMS, id, ids[best])
  redis.call('ZADD', K_LEASES, now + LEASE, id)
  return {1, best, active, avail, 0}
end
if not queue then
  return {0, -1, active, avail, 0}
end

if redis.call('ZCARD', q) >= allow and rank < 2 then
  -- Batch is shed first: the newest batch waiter gives up its place.
  local victim = redis.call('ZREVRANGEBYSCORE', q, 3 * RANK_SPAN, 2 * RANK_SPAN, 'LIMIT', 0, 1)[1]
  if victim then
    local _, _, vreplica = waiter(victim)
    drop_waiter(victim)
    if vreplica then notify(vreplica, victim .. ' -') end
  end
end
if redis.call('ZCARD', q) >= allow then
  return {3, -1, active, avail, 0}
end
local seq = redis.call('INCR', K_QSEQ)
redis.call('ZADD', q, rank * RANK_SPAN + seq, id)
redis.call('HSET', K_WAITERS, id, model .. '\t' .. rank .. '\t' .. replica)
redis.call('ZADD', K_WLEASES, now + wlease, id)
return {2, -1, active, avail, redis.call('ZRANK', q, id) + 1}
