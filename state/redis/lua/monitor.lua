-- Take or keep the monitor lease of each worker (one replica scrapes and
-- health-checks a worker at a time). ARG: replica, lease ms, worker ids...
-- Returns the ids this replica monitors now.
local me, ttl = ARG[1], tonumber(ARG[2])
local mine = {}
for i = 3, #ARG do
  local key = PREFIX .. 'mon:' .. ARG[i]
  local holder = redis.call('GET', key)
  if not holder or holder == me then
    redis.call('SET', key, me, 'PX', ttl)
    mine[#mine + 1] = ARG[i]
  end
end
return mine
