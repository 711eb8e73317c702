-- Prefill/decode disaggregation (state/pair.go): placed before claim.lua's
-- body for ClaimPair, which then runs as Claim does and, once the decode
-- claim is counted, calls pair_decide. ARGV: claim.lua's (ARG[1] to
-- ARG[17]), then ARG[18] the decider's minimum uncached tokens and
-- ARG[19] the prefill candidates as one MessagePack array {ids, caps,
-- bases, slopes, ahead weights, uncached weights, index bounds}.
--
-- pair_decide(dw, dm, ...) applies scoring.Disaggregate to the prompt
-- tokens decode worker dw's match of dm blocks leaves; when it
-- disaggregates, every prefill candidate but dw that is available and
-- under its cap scores base + slope*a + (uncached*u(m) + ahead*q), a its
-- live count, m its match and q its prefill ahead (the order Go's
-- Candidate.Score plus scoring.LiveScore give), and the lowest (ties: the
-- earlier) is claimed under id .. '/prefill' (state.PrefillClaimID),
-- holding its uncached prompt as prefill ahead and recording the prompt
-- in its index. Returns {uncached, prefill index (1-based, -1: none),
-- {live counts}, {1 if available}, {matches}, {prefill ahead},
-- {in-flight prefill}, {in-flight decode}} (the lists empty when the
-- decider did not look).
local function pair_decide(dw, dm, id, now, uncached, match, record, ptok)
  local u = uncached(dm)
  local out = {u, -1, {}, {}, {}, {}, {}, {}}
  local minu = tonumber(ARG[18]) or 0
  -- scoring.Disaggregate: something uncached, at least minu, and at
  -- least half the prompt (uncached(0)).
  if u <= 0 or u < minu or 2 * u < uncached(0) then return out end
  local pc = cmsgpack.unpack(ARG[19])
  local pids, pcaps, pbases, pslopes, pwa, pwu, pkvb = pc[1], pc[2], pc[3], pc[4], pc[5], pc[6], pc[7]
  local best, bestScore = -1, 0
  for i = 1, #pids do
    local w = pids[i]
    out[3][i], out[4][i], out[5][i], out[6][i], out[7][i], out[8][i] = 0, 0, 0, 0, 0, 0
    if w ~= dw and redis.call('HEXISTS', K_WORKERS, w) == 1 then
      local a = tonumber(redis.call('HGET', K_INFLIGHT, w)) or 0
      out[3][i] = a
      local ok = redis.call('HGET', K_OK, w)
      if ok then
        out[4][i] = 1
        if a < effective_cap(ok, pcaps[i], redis.call('HGET', K_LIM, w)) then
          local m = match(w)
          local q = tonumber(redis.call('HGET', K_TOKA, w)) or 0
          out[5][i], out[6][i] = m, q
          out[7][i] = tonumber(redis.call('HGET', K_TOKP, w)) or 0
          out[8][i] = tonumber(redis.call('HGET', K_TOKD, w)) or 0
          local s = (pbases[i] + pslopes[i] * a) + (pwu[i] * uncached(m) + pwa[i] * q)
          if best < 0 or s < bestScore then best, bestScore = i, s end
        end
      end
    end
  end
  if best < 0 or not global_room() then return out end
  local w, pid = pids[best], id .. '/prefill'
  inc(w)
  redis.call('HSET', K_CLAIMS, pid, w)
  redis.call('ZADD', K_LEASES, now + LEASE, pid)
  tok_hold(pid, w, uncached(out[5][best]), 0)
  record(w, pkvb[best])
  local hit = math.min(16 * out[5][best], ptok - 1)
  if hit > 0 then redis.call('HINCRBY', K_PHIT, w, hit) end
  out[2] = best
  return out
end
