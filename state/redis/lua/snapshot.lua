-- Every worker's state in one round trip. ARGV: the common header. Returns
-- {server time ms, workers (id, spec)..., in-flight..., health..., drain...,
-- one stats list per worker in the order of the workers list, queue depths
-- (model, critical, standard, batch)..., one telemetry list per worker,
-- registered workers' leases (id, expiry ms)..., in-flight prefill tokens
-- (id, n)..., in-flight decode tokens (id, n)..., prefix index sizes in
-- the order of the workers list, learned limits (id, limiter json)...,
-- predicted prefix hit tokens (id, n)..., prefill ahead tokens (id, n)...,
-- one latency statistics list (model, packed stats)... per worker in the
-- order of the workers list, one adapter placement list (adapter,
-- "running used_ms")... per worker in the order of the workers list}.
local now = now_ms()
purge(now)
local workers = redis.call('HGETALL', K_WORKERS)
local stats, tele, pblocks, lat, ads = {}, {}, {}, {}, {}
for i = 1, #workers, 2 do
  stats[#stats + 1] = redis.call('HGETALL', PREFIX .. 'stats:' .. workers[i])
  lat[#lat + 1] = redis.call('HGETALL', PREFIX .. 'lat:' .. workers[i])
  tele[#tele + 1] = redis.call('HGETALL', PREFIX .. 'tm:' .. workers[i])
  pblocks[#pblocks + 1] = 4 * redis.call('ZCARD', PREFIX .. 'px:' .. workers[i]) -- state.IndexStride
  ads[#ads + 1] = redis.call('HGETALL', adkey(workers[i]))
end
local queues = {}
for _, m in ipairs(redis.call('SMEMBERS', K_MODELS)) do
  local q = qkey(m)
  if redis.call('ZCARD', q) > 0 then
    queues[#queues + 1] = m
    for r = 0, 2 do
      queues[#queues + 1] = redis.call('ZCOUNT', q, r * RANK_SPAN, '(' .. ((r + 1) * RANK_SPAN))
    end
  end
end
local leases = redis.call('ZRANGE', K_WKLEASES, 0, -1, 'WITHSCORES')
return {now, workers, redis.call('HGETALL', K_INFLIGHT), redis.call('HGETALL', K_HEALTH),
  redis.call('HGETALL', K_DRAIN), stats, queues, tele, leases,
  redis.call('HGETALL', PREFIX .. 'tokp'), redis.call('HGETALL', PREFIX .. 'tokd'), pblocks,
  redis.call('HGETALL', K_LIMST), redis.call('HGETALL', K_PHIT), redis.call('HGETALL', K_TOKA),
  lat, ads}
