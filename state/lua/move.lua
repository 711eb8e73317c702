-- Re-attribute a held claim to the worker that really served (Envoy retried
-- elsewhere). ARGV: prefix, claim id, worker.
local id, to = ARGV[2], ARGV[3]
local w = redis.call('HGET', K_CLAIMS, id)
if not w then return redis.error_reply('unknown claim') end
if redis.call('HEXISTS', K_WORKERS, to) == 0 then return redis.error_reply('unknown worker') end
if w ~= to then
  dec(w)
  redis.call('HINCRBY', K_INFLIGHT, to, 1)
  redis.call('HSET', K_CLAIMS, id, to)
end
return 1
