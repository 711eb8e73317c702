-- Shared by every llm-router script. All keys live in one Redis Cluster
-- hash slot (the prefix carries a {hash tag}), so scripts may build
-- per-worker key names from PREFIX.
local K_WORKERS, K_INFLIGHT, K_HEALTH, K_DRAIN, K_CLAIMS, K_LEASES, K_CAP, K_MODELS, K_OK =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local PREFIX = ARGV[1]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function dec(worker)
  if redis.call('HINCRBY', K_INFLIGHT, worker, -1) < 0 then
    redis.call('HSET', K_INFLIGHT, worker, 0)
  end
end

-- purge drops claims whose lease lapsed (their replica stopped renewing:
-- it died) and gives their slots back. Bounded, so no call runs long.
local function purge(now)
  local lapsed = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, 512)
  for _, id in ipairs(lapsed) do
    local w = redis.call('HGET', K_CLAIMS, id)
    if w then
      dec(w)
      redis.call('HDEL', K_CLAIMS, id)
    end
    redis.call('ZREM', K_LEASES, id)
  end
  return #lapsed
end

-- refresh_ok keeps K_OK (worker → '1' when healthy and not draining) in
-- step with the two flags, so a claim reads availability with one HMGET.
local function refresh_ok(id)
  if redis.call('HGET', K_HEALTH, id) == 'healthy' and redis.call('HGET', K_DRAIN, id) ~= '1' then
    redis.call('HSET', K_OK, id, '1')
  else
    redis.call('HDEL', K_OK, id)
  end
end
