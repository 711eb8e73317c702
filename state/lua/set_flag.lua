-- Set a worker's health or drain flag. ARGV: prefix, worker, 'health' or
-- 'drain', value ('healthy'/'unhealthy'/'recovering'; '1'/'0').
local id, what, v = ARGV[2], ARGV[3], ARGV[4]
if redis.call('HEXISTS', K_WORKERS, id) == 0 then return redis.error_reply('unknown worker') end
if what == 'health' then
  redis.call('HSET', K_HEALTH, id, v)
elseif v == '1' then
  redis.call('HSET', K_DRAIN, id, '1')
else
  redis.call('HDEL', K_DRAIN, id)
end
refresh_ok(id)
return 1
