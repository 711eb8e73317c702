-- What a worker's monitor writes back. ARG: one or more operations:
--   limit, id, value, tokens, limiter json: store a learned concurrency
--     limit and token limit (state/limit.go) and hand the slots a raised
--     limit frees to waiters;
--   forget, id: empty the worker's prefix index (its engine restarted).
-- Unknown workers are skipped (a limit) or an error (forget).
local now = now_ms()
local i = 1
while i <= #ARG do
  local op, id = ARG[i], ARG[i + 1]
  if op == 'limit' then
    if redis.call('HEXISTS', K_WORKERS, id) == 1 then
      redis.call('HSET', K_LIM, id, ARG[i + 2])
      redis.call('HSET', K_LIMTOK, id, ARG[i + 3])
      redis.call('HSET', K_LIMST, id, ARG[i + 4])
      pump_worker(id, now)
    end
    i = i + 5
  elseif op == 'forget' then
    if redis.call('HEXISTS', K_WORKERS, id) == 0 then return redis.error_reply('unknown worker') end
    forget_prefixes(id)
    i = i + 2
  else
    return redis.error_reply('limits: unknown operation ' .. tostring(op))
  end
end
return 1
