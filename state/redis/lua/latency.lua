-- Latency-model statistics (scoring/latency.Stats): {P}:lat:<worker>, a
-- hash of model → MessagePack array {epoch, sums...} (epoch: Unix ns as a
-- decimal string, compared as a string so no precision is lost). ARGV
-- (after the common header): operations of five arguments each, op,
-- worker, model, epoch, packed stats:
--   add: add packed element-wise when the stored epoch is epoch (nothing
--        stored: store packed); else change nothing and reply the stored
--        epoch, which the caller rebases the contribution to and retries;
--   set: replace the stored stats with packed if their epoch is still
--        epoch (a compare-and-set, for a rebase).
-- Stored stats of another length are of another layout (latency.Version)
-- and are replaced by packed, whatever their epoch. An unknown worker's
-- operation is dropped. Returns one reply per operation: '' done (or
-- dropped), else the stored epoch.
local out = {}
for i = 1, #ARG, 5 do
  local op, w, model, epoch, packed = ARG[i], ARG[i + 1], ARG[i + 2], ARG[i + 3], ARG[i + 4]
  local reply = ''
  if redis.call('HEXISTS', K_WORKERS, w) == 1 then
    local key = PREFIX .. 'lat:' .. w
    local cur = redis.call('HGET', key, model)
    if not cur then
      if op == 'add' then redis.call('HSET', key, model, packed) end
    else
      local t = cmsgpack.unpack(cur)
      local a = cmsgpack.unpack(packed)
      if #t ~= #a then
        redis.call('HSET', key, model, packed)
      elseif t[1] ~= epoch then
        reply = t[1]
      elseif op == 'set' then
        redis.call('HSET', key, model, packed)
      else
        for j = 2, #t do t[j] = t[j] + a[j] end
        redis.call('HSET', key, model, cmsgpack.pack(t))
      end
    end
  end
  out[#out + 1] = reply
end
return out
