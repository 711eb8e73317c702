-- Merge workers into the registry without clobbering live state. ARGV
-- (after the common header): n, then per worker: id, spec json, cap,
-- health-if-absent, drain-if-absent ('1', '0' or ''), model count,
-- models..., stats field count, (field, value)... (stats are written only
-- when the worker has none: a replica restoring a Redis that lost its data).
local i = 2
local now = now_ms()
for _ = 1, tonumber(ARG[1]) do
  local id, spec, cap, health, drain = ARG[i], ARG[i + 1], ARG[i + 2], ARG[i + 3], ARG[i + 4]
  local nm = tonumber(ARG[i + 5])
  i = i + 6
  local models, list = {}, {}
  for j = 1, nm do
    models[ARG[i + j - 1]] = true
    list[j] = ARG[i + j - 1]
  end
  i = i + nm
  local old = redis.call('HGET', K_WORKERS, id)
  if old then
    for _, m in ipairs(cjson.decode(old).models or {}) do
      if not models[m] then redis.call('SREM', PREFIX .. 'model:' .. m, id) end
    end
  end
  for m in pairs(models) do
    redis.call('SADD', PREFIX .. 'model:' .. m, id)
    redis.call('SADD', K_MODELS, m)
  end
  redis.call('HSET', K_WORKERS, id, spec)
  redis.call('HSET', K_WMODELS, id, table.concat(list, '\n'))
  redis.call('HSET', K_CAP, id, cap)
  redis.call('HSETNX', K_HEALTH, id, health)
  if drain == '1' then redis.call('HSETNX', K_DRAIN, id, '1') end
  redis.call('HSETNX', K_INFLIGHT, id, 0)
  refresh_ok(id)
  local ns = tonumber(ARG[i])
  i = i + 1
  local sk = PREFIX .. 'stats:' .. id
  if ns > 0 and redis.call('EXISTS', sk) == 0 then
    for j = 0, ns - 1 do
      redis.call('HSET', sk, ARG[i + 2 * j], ARG[i + 2 * j + 1])
    end
  end
  i = i + 2 * ns
  pump_worker(id, now)
end
return 1
