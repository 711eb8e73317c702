-- Release a claim exactly once, fold the request's measurements into the
-- worker's moving averages, and hand the freed slot to the best waiter, in
-- one round trip. ARGV (after the common three): claim id, worker hint (for
-- the averages when the claim already lapsed), failed (0/1), latency s,
-- ttft s, tokens/s, alpha. Returns 1 if the claim was still held.
local id = ARGV[4]
local now = now_ms()
local w = redis.call('HGET', K_CLAIMS, id)
local released = 0
if w then
  redis.call('HDEL', K_CLAIMS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_GRANTS, id)
  dec(w)
  released = 1
else
  w = ARGV[5]
end

local function ema(key, f, x, alpha)
  if not x or x <= 0 then return end
  local old = redis.call('HMGET', key, f .. '_v', f .. '_n')
  local n = tonumber(old[2]) or 0
  local v = x
  if n > 0 then v = alpha * x + (1 - alpha) * tonumber(old[1]) end
  redis.call('HSET', key, f .. '_v', string.format('%.17g', v), f .. '_n', n + 1, f .. '_t', now)
end

if w ~= '' and redis.call('HEXISTS', K_WORKERS, w) == 1 then
  local sk = PREFIX .. 'stats:' .. w
  redis.call('HINCRBY', sk, 'req', 1)
  if ARGV[6] == '1' then
    redis.call('HINCRBY', sk, 'err', 1)
  else
    local alpha = tonumber(ARGV[10])
    ema(sk, 'lat', tonumber(ARGV[7]), alpha)
    ema(sk, 'ttft', tonumber(ARGV[8]), alpha)
    ema(sk, 'tps', tonumber(ARGV[9]), alpha)
  end
  if released == 1 then pump_worker(w, now) end
end
purge(now)
return released
