-- Release a claim exactly once, fold the request's measurements into the
-- worker's moving averages, and hand the freed slot to the best waiter, in
-- one round trip. ARGV (after the common header): claim id, worker hint (for
-- the averages when the claim already lapsed), failed (0/1), latency s,
-- ttft s, tokens/s, alpha, output tokens (0: unknown; the fair queue gives
-- back the output charged and not produced). Returns 1 if the claim was
-- still held.
local id = ARG[1]
local now = now_ms()
local w = redis.call('HGET', K_CLAIMS, id)
local released = 0
if w then
  fair_settle(id, tonumber(ARG[8]) or 0, now)
  redis.call('HDEL', K_CLAIMS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', K_GRANTS, id)
  dec(w, id)
  released = 1
else
  w = ARG[2]
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
  if ARG[3] == '1' then
    redis.call('HINCRBY', sk, 'err', 1)
    health_event(w, false, true, now)
  else
    health_event(w, true, true, now)
    local alpha = tonumber(ARG[7])
    ema(sk, 'lat', tonumber(ARG[4]), alpha)
    ema(sk, 'ttft', tonumber(ARG[5]), alpha)
    ema(sk, 'tps', tonumber(ARG[6]), alpha)
  end
  if released == 1 then pump_worker(w, now) end
end
purge(now)
return released
