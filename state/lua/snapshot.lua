-- Every worker's state in one round trip. ARGV: prefix. Returns {server
-- time ms, workers (id, spec)..., in-flight..., health..., drain..., then one
-- stats list per worker in the order of the workers list}.
local now = now_ms()
purge(now)
local workers = redis.call('HGETALL', K_WORKERS)
local stats = {}
for i = 1, #workers, 2 do
  stats[#stats + 1] = redis.call('HGETALL', PREFIX .. 'stats:' .. workers[i])
end
return {now, workers, redis.call('HGETALL', K_INFLIGHT), redis.call('HGETALL', K_HEALTH),
  redis.call('HGETALL', K_DRAIN), stats}
