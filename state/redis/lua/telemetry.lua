-- Store what a scrape saw. ARG: n, then per worker: id, field count,
-- (field, value)... Fields: kv, wait, run, gpu, phit, kvb, start, hmark,
-- pmark, hratio, gmark, smark, sshare, each with its _t (value, ms when seen),
-- err, at, by, lora (the engine's adapter report, JSON), and lora_held,
-- lora_run, lora_t, not stored: the report's adapters held and running
-- or queued (newline-separated) and its time, which sync the worker's
-- adapter placement. Absent fields are left as they were,
-- so a value keeps its own (aging) time.
local i = 2
for _ = 1, tonumber(ARG[1]) do
  local id, n = ARG[i], tonumber(ARG[i + 1])
  i = i + 2
  if redis.call('HEXISTS', K_WORKERS, id) == 1 then
    local key = PREFIX .. 'tm:' .. id
    redis.call('HDEL', key, 'err')
    local held, run, lt
    for j = 0, n - 1 do
      local f, v = ARG[i + 2 * j], ARG[i + 2 * j + 1]
      if f == 'lora_held' then held = v
      elseif f == 'lora_run' then run = v
      elseif f == 'lora_t' then lt = tonumber(v)
      else redis.call('HSET', key, f, v) end
    end
    if held then
      -- state.SyncAdapters: an idle placement the engine no longer holds
      -- goes; an adapter it runs or queues that no claim placed comes.
      local set = {}
      for a in string.gmatch(held, '[^\n]+') do set[a] = true end
      local ak = adkey(id)
      local flat = redis.call('HGETALL', ak)
      for k = 1, #flat, 2 do
        if ad_parse(flat[k + 1]) == 0 and not set[flat[k]] then redis.call('HDEL', ak, flat[k]) end
      end
      for a in string.gmatch(run or '', '[^\n]+') do
        redis.call('HSETNX', ak, a, '0 ' .. (lt or 0))
      end
    end
  end
  i = i + 2 * n
end
return 1
