-- Set a worker's health or drain flag. ARGV (after the common header):
-- worker, 'health' or 'drain', value ('healthy'/'unhealthy'/'recovering';
-- '1'/'0'). A worker becoming available takes waiters at once.
local id, what, v = ARG[1], ARG[2], ARG[3]
if redis.call('HEXISTS', K_WORKERS, id) == 0 then return redis.error_reply('unknown worker') end
if what == 'health' then
  redis.call('HSET', K_HEALTH, id, v)
  redis.call('HSET', PREFIX .. 'hstate:' .. id, 'afail', 0, 'pfail', 0, 'asucc', 0, 'since', now_ms())
  if v == 'unhealthy' then forget_prefixes(id) end
elseif v == '1' then
  redis.call('HSET', K_DRAIN, id, '1')
else
  redis.call('HDEL', K_DRAIN, id)
end
refresh_ok(id)
pump_worker(id, now_ms())
return 1
