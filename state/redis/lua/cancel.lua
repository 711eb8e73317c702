-- A waiter leaves (client gone, timeout). ARGV (after the common header):
-- waiter id. Returns {'removed'}, {'granted', worker} when a slot was
-- handed to it meanwhile (the caller releases or uses it), or {'gone'}
-- (shed, or its lease lapsed).
local id = ARG[1]
if redis.call('HEXISTS', K_WAITERS, id) == 1 then
  drop_waiter(id)
  return {'removed'}
end
local w = redis.call('HGET', K_GRANTS, id)
if w and redis.call('HEXISTS', K_CLAIMS, id) == 1 then
  return {'granted', w}
end
return {'gone'}
