-- The periodic safety pump: hand free slots to waiters of every model
-- (slots freed by lapsed leases, a worker undrained or recovered are also
-- pumped where that happens; this catches anything else), and forget
-- fair-queue counters that decayed to nothing. ARGV: the common header.
local now = now_ms()
purge(now)
for _, m in ipairs(redis.call('SMEMBERS', K_MODELS)) do
  pump_model(m, now)
  fair_prune(m, now)
end
return 1
