-- Where a waiter stands, for replicas that missed a notification. ARGV
-- (after the common header): waiter id. Returns {'queued', position},
-- {'granted', worker} or {'gone'}.
local id = ARG[1]
local model = waiter(id)
if model then
  return {'queued', (redis.call('ZRANK', qkey(model), id) or -1) + 1}
end
local w = redis.call('HGET', K_GRANTS, id)
if w and redis.call('HEXISTS', K_CLAIMS, id) == 1 then
  return {'granted', w}
end
return {'gone'}
