-- Set a worker's health or drain flag. ARGV (after the common three):
-- worker, 'health' or 'drain', value ('healthy'/'unhealthy'/'recovering';
-- '1'/'0'). A worker becoming available takes waiters at once.
local id, what, v = ARGV[4], ARGV[5], ARGV[6]
if redis.call('HEXISTS', K_WORKERS, id) == 0 then return redis.error_reply('unknown worker') end
if what == 'health' then
  redis.call('HSET', K_HEALTH, id, v)
elseif v == '1' then
  redis.call('HSET', K_DRAIN, id, '1')
else
  redis.call('HDEL', K_DRAIN, id)
end
refresh_ok(id)
pump_worker(id, now_ms())
return 1
