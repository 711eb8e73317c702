-- Store what a scrape saw. ARG: n, then per worker: id, field count,
-- (field, value)... Fields: kv, wait, run, gpu, phit, kvb, start, hmark,
-- pmark, hratio, gmark, smark, sshare, each with its _t (value, ms when seen),
-- err, at, by. Absent fields are left as they were,
-- so a value keeps its own (aging) time.
local i = 2
for _ = 1, tonumber(ARG[1]) do
  local id, n = ARG[i], tonumber(ARG[i + 1])
  i = i + 2
  if redis.call('HEXISTS', K_WORKERS, id) == 1 then
    local key = PREFIX .. 'tm:' .. id
    redis.call('HDEL', key, 'err')
    for j = 0, n - 1 do
      redis.call('HSET', key, ARG[i + 2 * j], ARG[i + 2 * j + 1])
    end
  end
  i = i + 2 * n
end
return 1
