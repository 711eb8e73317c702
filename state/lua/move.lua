-- Re-attribute a held claim to the worker that really served (Envoy retried
-- elsewhere). ARGV (after the common three): claim id, worker.
local id, to = ARGV[4], ARGV[5]
local w = redis.call('HGET', K_CLAIMS, id)
if not w then return redis.error_reply('unknown claim') end
if redis.call('HEXISTS', K_WORKERS, to) == 0 then return redis.error_reply('unknown worker') end
if w ~= to then
  dec(w)
  inc(to)
  redis.call('HSET', K_CLAIMS, id, to)
  pump_worker(w, now_ms())
end
return 1
