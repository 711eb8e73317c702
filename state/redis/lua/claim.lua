-- Atomic pick-and-claim, or a place in the model's queue. ARGV (after the
-- common header): claim id, candidates as one MessagePack array {ids, caps,
-- bases, slopes, mults} (with live reads, eleven more: the candidates'
-- scoring.LiveWeights as miss, prefill, decode and uncached coefficients,
-- prefill limits, index bounds, match trusts, ahead and ahead-decode
-- coefficients, ceilings, stall coefficients), model, queue (0/1), priority
-- rank, queue allowance for that rank, replica, waiter lease ms, fair-queue
-- tenant, cost, output cost per token and output tokens charged (see
-- state/fair.go), live reads ('' none, else '1'), prompt block
-- hashes (8 bytes each, concatenated), prompt
-- tokens, decode tokens (without live reads: '', '', 0, 0), adapter (''
-- none; with one, four more candidate arrays after the others: the
-- scoring.AdapterWeights idle, load and evict prices and slots).
--
-- With an adapter each evaluated candidate's curve also gets
-- scoring.AdapterScore of the adapter's state there (ad_state: active,
-- idle, a free slot, evict), and the winner places it (ad_place), all in
-- this step: two replicas cannot both find a cold adapter and place it
-- on two workers.
--
-- With live reads each evaluated candidate also gets scoring.LiveScore
-- (scoring/live.go): its match m (leading blocks its prefix index holds,
-- by binary search: log2(n) lookups) and its in-flight prefill p, decode
-- d and prefill-ahead q tokens are read, and it scores
--   prefill*p + decode*d + uncached*u(m) + ahead*q + aheaddecode*(q + u(m))*d
--     + miss*(1 - trust*m/n) + stall*u(m)
-- (u(m) the prompt tokens past m blocks; the miss part 0 with no blocks;
-- m counts 0 when q + u(m) exceeds a positive prefill limit), evaluated
-- in exactly that order, as Go does; a candidate whose live score less
-- its stall part passes its positive ceiling is skipped as if full. The winner's index records
-- the blocks and the request's tokens are held on it until the claim ends,
-- its uncached prompt also as prefill ahead until its first token.
--
-- Waiters already queued at this priority or better are served first (a
-- freed slot goes to them before a newcomer). Otherwise every candidate's
-- curve (base + slope*a) * (1 + mult*a) is evaluated at its live in-flight
-- count a, workers that are full, unhealthy or draining are skipped, and
-- the lowest is claimed (ties: the earlier candidate); this mirrors
-- scoring.Pick. With nothing available the request queues, if the queue
-- has room for its priority; a non-batch request finding no room sheds the
-- newest batch waiter.
-- Returns {outcome (1 claimed, 2 queued, 3 queue full, 0 none available),
-- (the last two parts: each candidate's adapter state, 0 for those not
-- evaluated, and the placement the winner evicted),
-- index (1-based, -1: none), {live counts}, {1 if available}, queue position,
-- and with live reads {matches}, {in-flight prefill}, {in-flight decode},
-- {prefill ahead} per candidate (0 for those not evaluated, match -1 for
-- those whose match was not looked up because they could not win; empty
-- without)}.
local id = ARG[1]
local c = cmsgpack.unpack(ARG[2])
local model, queue, rank, allow, replica, wlease =
  ARG[3], ARG[4] == '1', tonumber(ARG[5]), tonumber(ARG[6]), ARG[7], tonumber(ARG[8])
local ids, caps, bases, slopes, mults = c[1], c[2], c[3], c[4], c[5]
local tenant, cost, ocost, otok = ARG[9], tonumber(ARG[10]), tonumber(ARG[11]), tonumber(ARG[12])
local aff = ARG[13] == '1'
local wm, wp, wd, wu, plim, kvb, trust, wa, wad, ceil, wst =
  c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15], c[16]
local blocks, ptok, dtok = ARG[14] or '', tonumber(ARG[15]) or 0, tonumber(ARG[16]) or 0
local adapter = ARG[17] or ''
local ad0 = 6
if aff then ad0 = 17 end
local adidle, adload, adevict, adslots = c[ad0], c[ad0 + 1], c[ad0 + 2], c[ad0 + 3]
local adst = {}
-- adprice is scoring.AdapterScore for candidate i in state s.
local function adprice(i, s)
  if s == 2 then return adidle[i] end
  if s == 3 then return adload[i] end
  if s == 4 then return adload[i] + adevict[i] end
  return 0
end
local nb = math.floor(#blocks / 8)
-- The index keeps the last block of each group of STRIDE (state.IndexStride).
local STRIDE = 4
local ng = math.floor(nb / STRIDE)
-- groups[j] is the last block of group j (1-based), cut once: every
-- candidate's binary search reads them.
local groups = {}
for j = 1, ng do groups[j] = string.sub(blocks, 8 * STRIDE * j - 7, 8 * STRIDE * j) end
local full = STRIDE * ng -- the longest match the index can find
local function uncached(m) return math.max(0, ptok - 16 * m) end
local now = now_ms()
purge(now)
if redis.call('HEXISTS', K_CLAIMS, id) == 1 or redis.call('HEXISTS', K_WAITERS, id) == 1 then
  return redis.error_reply('claim already held')
end
local q = qkey(model)
local ahead = false
if queue then
  pump_model(model, now)
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  ahead = head[1] ~= nil and tonumber(head[2]) < (rank + 1) * RANK_SPAN
end

-- Redis keeps a hash of up to hash-max-listpack-entries fields (512 in
-- 7.0) as a listpack, where HMGET finds each field by a scan: n candidates
-- of a hash of n workers cost n² (1.4 ms a claim at 512 workers). For
-- many candidates of such a hash, one HGETALL and a table lookup cost n.
local function hmget(key)
  if #ids > 16 and redis.call('HLEN', key) <= 512 then
    local flat, by, out = redis.call('HGETALL', key), {}, {}
    for i = 1, #flat, 2 do by[flat[i]] = flat[i + 1] end
    for i = 1, #ids do out[i] = by[ids[i]] or false end
    return out
  end
  return redis.call('HMGET', key, unpack(ids))
end
local inflight = hmget(K_INFLIGHT)
local ok = hmget(K_OK)
local lims = hmget(K_LIM)
local tokp, tokd, toka, limt
if aff then
  tokp, tokd, toka, limt = hmget(K_TOKP), hmget(K_TOKD), hmget(K_TOKA), hmget(K_LIMTOK)
end
-- match: the leading blocks worker i's index holds; the index keeps a
-- leading run of every chain it holds part of, so a binary search finds it.
local function match(w)
  local key = pkey(w)
  if ng == 0 or not redis.call('ZSCORE', key, groups[1]) then return 0 end
  local lo, hi = 1, ng
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if redis.call('ZSCORE', key, groups[mid]) then lo = mid else hi = mid - 1 end
  end
  return STRIDE * lo
end
-- record makes the prompt's blocks the most recent of worker w's index,
-- block 1 the most recent of all (so eviction takes a prompt's tail
-- first), then evicts the least recent beyond bound entries.
local function record(w, bound)
  if ng == 0 then return end
  local key = pkey(w)
  local top = redis.call('INCRBY', K_PSEQ, ng)
  local args = {}
  for j = 1, ng do
    args[#args + 1] = top - j
    args[#args + 1] = groups[j]
    if #args >= 1000 or j == ng then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  local extra = redis.call('ZCARD', key) - math.max(1, math.floor(bound / STRIDE))
  if extra > 0 then redis.call('ZREMRANGEBYRANK', key, 0, extra - 1) end
end
-- live is scoring.LiveScore for match m, with in-flight prefill p, decode
-- d and prefill ahead q, and the part of it the ceiling bounds (all but
-- the stall part).
local function live(i, m, p, d, q)
  -- The prefill guard: a warm worker past its prefill limit scores as cold.
  local u = uncached(m)
  if plim[i] > 0 and q + u > plim[i] then m, u = 0, uncached(0) end
  local s = wp[i] * p + wd[i] * d + wu[i] * u + wa[i] * q + wad[i] * (q + u) * d
  if nb > 0 then s = s + wm[i] * (1 - trust[i] * m / nb) end
  return s + wst[i] * u, s
end
-- over is LiveWeights.Over: b, the bounded part of a live score, passes
-- candidate i's ceiling.
local function over(i, b) return ceil[i] > 0 and b > ceil[i] end
-- Two passes (see scoring.LiveBounds): every evaluable
-- candidate's curve and, with live reads, its live score with a full
-- match (liveLo) and with none (liveCold); then the matches are looked up
-- only for those whose curve plus liveLo is not above the lowest curve
-- plus liveCold: the others can neither win nor tie.
local best, bestScore = -1, 0
local active, avail, matched, pre, dec_, ahd = {}, {}, {}, {}, {}, {}
-- liveLo and liveCold are kept for a candidate whose lookup finds a full
-- match or none.
local curve, lo, liveLo, liveCold, minHi = {}, {}, {}, {}, math.huge
local boundLo, boundCold = {}, {}
local tlim = {}
-- fits is Limit.TokenRoom for candidate i with match m.
local function fits(i, m)
  local l = tlim[i]
  return l <= 0 or active[i] == 0 or pre[i] + dec_[i] + uncached(m) + dtok <= l
end
for i = 1, #ids do
  local a = tonumber(inflight[i]) or 0
  active[i] = a
  matched[i], pre[i], dec_[i], ahd[i] = 0, 0, 0, 0
  if adapter ~= '' then adst[i] = 0 end
  if ok[i] then
    avail[i] = 1
    if a < effective_cap(ok[i], caps[i], lims[i]) then
      curve[i] = (bases[i] + slopes[i] * a) * (1 + mults[i] * a)
      if adapter ~= '' then
        -- Not a function of the match: a part of the curve for the bounds.
        adst[i] = ad_state(ids[i], adapter, adslots[i])
        curve[i] = curve[i] + adprice(i, adst[i])
      end
      if aff then
        local p, d, q = tonumber(tokp[i]) or 0, tonumber(tokd[i]) or 0, tonumber(toka[i]) or 0
        pre[i], dec_[i], ahd[i], tlim[i] = p, d, q, tonumber(limt[i]) or 0
        if not fits(i, full) then
          -- Past its token limit even with a full match: out.
          curve[i] = nil
        elseif wm[i] >= 0 and wp[i] >= 0 and wd[i] >= 0 and wu[i] >= 0 and wa[i] >= 0 and wad[i] >= 0 and wst[i] >= 0 then
          -- Bounds hold for non-negative weights only; else no lookup is
          -- skipped. A candidate past its ceiling even with a full match
          -- is out; one that fits or stays under its ceiling only with
          -- some match does not bound the others.
          liveLo[i], boundLo[i] = live(i, full, p, d, q)
          if over(i, boundLo[i]) then
            curve[i] = nil
          else
            lo[i] = curve[i] + liveLo[i]
            if fits(i, 0) then
              liveCold[i], boundCold[i] = live(i, 0, p, d, q)
              if not over(i, boundCold[i]) and curve[i] + liveCold[i] < minHi then
                minHi = curve[i] + liveCold[i]
              end
            end
          end
        end
      end
    end
  else
    avail[i] = 0
  end
end
for i = 1, #ids do
  if curve[i] then
    local s = curve[i]
    if aff and lo[i] and lo[i] > minHi then
      matched[i] = -1 -- Live.Unread
      s = nil
    elseif aff then
      local m = match(ids[i])
      matched[i] = m
      if not fits(i, m) then
        s = nil
      else
        local l, b
        if m == 0 and liveCold[i] then
          l, b = liveCold[i], boundCold[i]
        elseif m == full and liveLo[i] then
          l, b = liveLo[i], boundLo[i]
        else
          l, b = live(i, m, pre[i], dec_[i], ahd[i])
        end
        if over(i, b) then s = nil else s = s + l end
      end
    end
    if s and (best < 0 or s < bestScore) then
      best, bestScore = i, s
    end
  end
end
if not aff then matched, pre, dec_, ahd = {}, {}, {}, {} end
if best > 0 and not ahead and global_room() then
  local w = ids[best]
  inc(w)
  redis.call('HSET', K_CLAIMS, id, w)
  redis.call('ZADD', K_LEASES, now + LEASE, id)
  local evicted = ''
  if adapter ~= '' then evicted = ad_place(id, w, adapter, adslots[best], now) end
  -- ClaimPair (claimpair.lua; nil for Claim): a paired decode claim holds
  -- its uncached prompt and output as decode.
  local pair
  if pair_decide then pair = pair_decide(w, matched[best], id, now, uncached, match, record, ptok) end
  if aff then
    if pair and pair[2] > 0 then
      tok_hold(id, w, 0, pair[1] + dtok)
    else
      tok_hold(id, w, uncached(matched[best]), dtok)
    end
    record(w, kvb[best])
    -- Prompt.PredictedHits: the tokens the match predicts cached.
    local hit = math.min(16 * matched[best], ptok - 1)
    if hit > 0 then redis.call('HINCRBY', K_PHIT, w, hit) end
  end
  if queue then fair_dispatch(id, model, tenant, cost, ocost, otok, now) end
  return {1, best, active, avail, 0, matched, pre, dec_, ahd, adst, evicted, pair}
end
if not queue then
  return {0, -1, active, avail, 0, matched, pre, dec_, ahd, adst, ''}
end

if redis.call('ZCARD', q) >= allow and rank < 2 then
  -- Batch is shed first: the newest batch waiter gives up its place.
  local victim = redis.call('ZREVRANGEBYSCORE', q, 3 * RANK_SPAN, 2 * RANK_SPAN, 'LIMIT', 0, 1)[1]
  if victim then
    local _, _, vreplica = waiter(victim)
    drop_waiter(victim)
    if vreplica then notify(vreplica, victim .. ' -') end
  end
end
if redis.call('ZCARD', q) >= allow then
  return {3, -1, active, avail, 0, matched, pre, dec_, ahd, adst, ''}
end
local seq = redis.call('INCR', K_QSEQ)
redis.call('ZADD', q, rank * RANK_SPAN + seq, id)
redis.call('HSET', K_WAITERS, id, model .. '\t' .. rank .. '\t' .. replica)
fair_join(id, model, rank, tenant, cost, ocost, otok, seq, now)
redis.call('ZADD', K_WLEASES, now + wlease, id)
if aff and (ptok > 0 or dtok > 0) then
  -- Held from the grant, on whichever worker: all of the prompt uncached.
  redis.call('HSET', K_WTOK, id, math.max(0, ptok) .. ' ' .. math.max(0, dtok))
end
return {2, -1, active, avail, redis.call('ZRANK', q, id) + 1, matched, pre, dec_, ahd, adst, ''}
