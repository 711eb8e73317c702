-- A claim's request had its first token: its uncached prompt stops counting
-- as prefill ahead on its worker. ARGV (after the common header): claim
-- id. Only the first call changes anything (the claim's record keeps what
-- is still ahead); an unknown claim is ignored. Returns 1 if the claim is
-- held here.
local id = ARG[1]
local w = redis.call('HGET', K_CLAIMS, id)
if not w then return 0 end
local rec = redis.call('HGET', K_CTOK, id)
if rec then
  local p, d, a = tok_parse(rec)
  if a > 0 then
    redis.call('HSET', K_CTOK, id, p .. ' ' .. d .. ' 0')
    if redis.call('HEXISTS', K_WORKERS, w) == 1 then tok_add(w, 0, 0, -a) end
  end
end
return 1
