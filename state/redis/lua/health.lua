-- An active health check's result. ARG: worker, '1' passed / '0' failed.
-- Returns the worker's health afterwards.
local st = health_event(ARG[1], ARG[2] == '1', false, now_ms())
if not st then return redis.error_reply('unknown worker') end
return st
