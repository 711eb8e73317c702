-- Re-attribute a held claim to the worker that really served (Envoy retried
-- elsewhere). ARGV (after the common header): claim id, worker.
local id, to = ARG[1], ARG[2]
local w = redis.call('HGET', K_CLAIMS, id)
if not w then return redis.error_reply('unknown claim') end
if redis.call('HEXISTS', K_WORKERS, to) == 0 then return redis.error_reply('unknown worker') end
if w ~= to then
  local now = now_ms()
  tok_move(id, w, to)
  ad_move(id, w, to, now)
  dec(w)
  inc(to)
  redis.call('HSET', K_CLAIMS, id, to)
  -- Envoy moved the request because w failed it (connect failure, reset
  -- or 503): a passive failure signal for w.
  redis.call('HINCRBY', PREFIX .. 'stats:' .. w, 'err', 1)
  health_event(w, false, true, now)
  pump_worker(w, now)
end
return 1
