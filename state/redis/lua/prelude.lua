-- Shared by every llm-router script. All keys a script touches live in one
-- Redis Cluster hash slot (the prefix carries a {hash tag}: the store's, or
-- its pool's), so scripts may build per-worker and per-model key names from
-- PREFIX.
--
-- Every script's ARGV starts with a common header: prefix, claim lease ms,
-- global in-flight cap (0: none), health policy ("active threshold,passive
-- threshold,hold-down ms"), fair-queue counter half-life ms (0: none).
-- Script-specific arguments follow, as ARG[1]...
local K_WORKERS, K_INFLIGHT, K_HEALTH, K_DRAIN, K_CLAIMS, K_LEASES, K_CAP, K_MODELS, K_OK,
  K_WAITERS, K_WLEASES, K_GRANTS, K_QSEQ, K_TOTAL, K_WMODELS, K_WKLEASES, K_SOURCE =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
  KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local PREFIX, LEASE, GLOBAL_CAP = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local ACTIVE_FAILS, PASSIVE_FAILS, HOLD_MS = string.match(ARGV[4], '^(%d+),(%d+),(%d+)$')
ACTIVE_FAILS, PASSIVE_FAILS, HOLD_MS = tonumber(ACTIVE_FAILS), tonumber(PASSIVE_FAILS), tonumber(HOLD_MS)
local FAIR_HALF = tonumber(ARGV[5])
local ARG = {}
for i = 6, #ARGV do ARG[i - 5] = ARGV[i] end
-- A queue entry's score: priority rank (0 critical, 1 standard, 2 batch)
-- times RANK_SPAN plus a global arrival sequence: priority first, then
-- arrival, across every replica.
local RANK_SPAN = 1e15

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function qkey(model) return PREFIX .. 'q:' .. model end

-- Token load (see state/affinity.go, scoring/live.go): per worker in-flight
-- prefill, decode and prefill-ahead tokens (K_TOKA: the uncached prompts of
-- claims before their first token), and per held claim ("p d a": a the
-- part of p still ahead) or queued waiter ("p d") the tokens it counts, so
-- that whatever ends the claim gives exactly those back.
local K_TOKP, K_TOKD, K_CTOK, K_WTOK = PREFIX .. 'tokp', PREFIX .. 'tokd', PREFIX .. 'ctok', PREFIX .. 'wtok'
-- K_FHELD: per held claim, what its tenant was charged for output
-- ("model\ttenant\tcost per token\ttokens"), for the release to settle.
local K_FHELD = PREFIX .. 'fheld'
local K_TOKA = PREFIX .. 'toka'
-- A worker's prefix index: a zset of 8-byte block hashes scored by a
-- recency sequence (K_PSEQ), earlier blocks of a prompt more recent.
local K_PSEQ = PREFIX .. 'pseq'
local function pkey(worker) return PREFIX .. 'px:' .. worker end

local function tok_add(w, p, d, a)
  if p ~= 0 and redis.call('HINCRBY', K_TOKP, w, p) < 0 then redis.call('HSET', K_TOKP, w, 0) end
  if d ~= 0 and redis.call('HINCRBY', K_TOKD, w, d) < 0 then redis.call('HSET', K_TOKD, w, 0) end
  if a ~= 0 and redis.call('HINCRBY', K_TOKA, w, a) < 0 then redis.call('HSET', K_TOKA, w, 0) end
end

-- tok_hold counts p prefill and d decode tokens of claim id on worker w,
-- the p also ahead until the claim's first token.
local function tok_hold(id, w, p, d)
  if p <= 0 and d <= 0 then return end
  redis.call('HSET', K_CTOK, id, p .. ' ' .. d .. ' ' .. p)
  tok_add(w, p, d, p)
end

-- tok_parse reads a claim's "p d a" or a waiter's "p d" (a 0).
local function tok_parse(rec)
  local p, d, a = string.match(rec, '^(%d+) (%d+) ?(%d*)$')
  return tonumber(p) or 0, tonumber(d) or 0, tonumber(a) or 0
end

-- tok_end gives claim id's tokens back from worker w (nil: none held). A
-- deregistered worker has no counts left to give back to.
local function tok_end(id, w)
  local rec = redis.call('HGET', K_CTOK, id)
  if not rec then return end
  redis.call('HDEL', K_CTOK, id)
  if redis.call('HEXISTS', K_WORKERS, w) == 1 then
    local p, d, a = tok_parse(rec)
    tok_add(w, -p, -d, -a)
  end
end

-- tok_move re-attributes claim id's tokens from worker a to worker b.
local function tok_move(id, a, b)
  local rec = redis.call('HGET', K_CTOK, id)
  if not rec then return end
  local p, d, q = tok_parse(rec)
  if redis.call('HEXISTS', K_WORKERS, a) == 1 then tok_add(a, -p, -d, -q) end
  tok_add(b, p, d, q)
end

-- forget_prefixes drops worker w's prefix index: it went away or may have
-- restarted with an empty cache.
local function forget_prefixes(w)
  redis.call('DEL', pkey(w))
end

-- LoRA adapter placement (state/adapters.go): per worker a hash of
-- adapter -> "running used_ms"; per claim that placed one, its adapter
-- (K_CAD), so that whatever ends the claim gives its request back.
local K_CAD = PREFIX .. 'cad'
local function adkey(w) return PREFIX .. 'ad:' .. w end
local function ad_parse(rec)
  local a, u = string.match(rec, '^(%d+) (%d+)$')
  return tonumber(a) or 0, tonumber(u) or 0
end
-- ad_state is state.AdapterStateIn: 1 active, 2 idle, 3 a free slot, 4
-- evict (scoring.AdapterState).
local function ad_state(w, name, slots)
  if slots <= 0 then slots = 1 end
  local rec = redis.call('HGET', adkey(w), name)
  if rec then
    if ad_parse(rec) > 0 then return 1 end
    return 2
  end
  if redis.call('HLEN', adkey(w)) < slots then return 3 end
  return 4
end
-- ad_place is state.PlaceAdapter for claim id on worker w; it returns the
-- adapter evicted ('' none): the least recently used with nothing
-- running (ties: the first name).
local function ad_place(id, w, name, slots, now)
  local key = adkey(w)
  local a = 0
  local rec = redis.call('HGET', key, name)
  if rec then a = ad_parse(rec) end
  redis.call('HSET', key, name, (a + 1) .. ' ' .. now)
  redis.call('HSET', K_CAD, id, name)
  if slots <= 0 then slots = 1 end
  if redis.call('HLEN', key) <= slots then return '' end
  local flat = redis.call('HGETALL', key)
  local victim, vused
  for i = 1, #flat, 2 do
    local act, used = ad_parse(flat[i + 1])
    if act == 0 and (not victim or used < vused or (used == vused and flat[i] < victim)) then
      victim, vused = flat[i], used
    end
  end
  if not victim then return '' end
  redis.call('HDEL', key, victim)
  return victim
end
-- ad_add adds n running requests of adapter name on worker w (at least
-- 0), used at now when n > 0.
local function ad_add(w, name, n, now)
  local key = adkey(w)
  local rec = redis.call('HGET', key, name)
  if not rec and n <= 0 then return end
  local a, u = 0, now
  if rec then a, u = ad_parse(rec) end
  if n > 0 then u = now end
  redis.call('HSET', key, name, math.max(0, a + n) .. ' ' .. u)
end
-- ad_end gives claim id's request on its adapter back on worker w.
local function ad_end(id, w)
  local name = redis.call('HGET', K_CAD, id)
  if not name then return end
  redis.call('HDEL', K_CAD, id)
  if redis.call('HEXISTS', K_WORKERS, w) == 1 then ad_add(w, name, -1, 0) end
end
-- ad_move follows claim id from worker a to worker b.
local function ad_move(id, a, b, now)
  local name = redis.call('HGET', K_CAD, id)
  if not name then return end
  if redis.call('HEXISTS', K_WORKERS, a) == 1 then ad_add(a, name, -1, 0) end
  ad_add(b, name, 1, now)
end

local function inc(worker)
  redis.call('HINCRBY', K_INFLIGHT, worker, 1)
  redis.call('INCR', K_TOTAL)
end

local function dec(worker, id)
  -- A deregistered worker's claims still end; they only give back the
  -- global count.
  if id then
    tok_end(id, worker)
    ad_end(id, worker)
    redis.call('HDEL', K_FHELD, id)
  end
  if redis.call('HEXISTS', K_WORKERS, worker) == 1 and redis.call('HINCRBY', K_INFLIGHT, worker, -1) < 0 then
    redis.call('HSET', K_INFLIGHT, worker, 0)
  end
  if redis.call('DECR', K_TOTAL) < 0 then
    redis.call('SET', K_TOTAL, 0)
  end
end

-- refresh_ok keeps K_OK in step with the health and drain flags, so a
-- claim reads availability with one HMGET: '1' healthy and not draining,
-- 'r' recovering and not draining (half-open: one request at a time, a
-- probe), absent otherwise.
local function refresh_ok(id)
  local h = redis.call('HGET', K_HEALTH, id)
  if redis.call('HGET', K_DRAIN, id) == '1' or (h ~= 'healthy' and h ~= 'recovering') then
    redis.call('HDEL', K_OK, id)
  elseif h == 'healthy' then
    redis.call('HSET', K_OK, id, '1')
  else
    redis.call('HSET', K_OK, id, 'r')
  end
end

-- A worker's learned concurrency limit (adaptive caps, state/limit.go):
-- K_LIM holds the integer the scripts enforce, K_LIMTOK its token limit,
-- K_LIMST the limiter's JSON.
local K_LIM, K_LIMTOK, K_LIMST = PREFIX .. 'lim', PREFIX .. 'limtok', PREFIX .. 'limst'
-- Prompt tokens the prefix index predicted cached, per worker (a counter,
-- compared with the engine's own prefix-cache hits).
local K_PHIT = PREFIX .. 'phitp'

-- effective_cap is a worker's cap given its availability, configured cap
-- (0: none) and learned limit lim (nil or 0: none), math.huge when neither
-- bounds it: a recovering worker takes one request at a time.
local function effective_cap(ok, cap, lim)
  lim = tonumber(lim) or 0
  if cap <= 0 then cap = math.huge end
  if lim > 0 and lim < cap then cap = lim end
  if ok == 'r' then return math.min(cap, 1) end
  return cap
end

local function global_room()
  return GLOBAL_CAP <= 0 or (tonumber(redis.call('GET', K_TOTAL)) or 0) < GLOBAL_CAP
end

-- free reports whether worker w can take one more request now.
local function free(w)
  local ok = redis.call('HGET', K_OK, w)
  if not ok then return false end
  local a = tonumber(redis.call('HGET', K_INFLIGHT, w)) or 0
  local cap = effective_cap(ok, tonumber(redis.call('HGET', K_CAP, w)) or 0, redis.call('HGET', K_LIM, w))
  return a < cap, a, cap
end

-- tok_room is Limit.TokenRoom: whether worker w, holding a claims, may
-- take one of need more tokens under its learned token limit.
local function tok_room(w, a, need)
  local lim = tonumber(redis.call('HGET', K_LIMTOK, w)) or 0
  if lim <= 0 or a == 0 then return true end
  local held = (tonumber(redis.call('HGET', K_TOKP, w)) or 0) + (tonumber(redis.call('HGET', K_TOKD, w)) or 0)
  return held + need <= lim
end

-- Fair queuing within a priority band (state/fair.go; Memory's fair.go
-- mirrors every step). Per model and band, the set of backlogged tenants
-- and each one's waiters by arrival; per waiter "tenant\tcost"; per model
-- and tenant a counter "value at-ms", halved every FAIR_HALF ms.
local K_WFAIR = PREFIX .. 'wfair'
local function fbkey(model, rank) return PREFIX .. 'ft:' .. model .. '\t' .. rank end
local function fqkey(model, rank, t) return PREFIX .. 'fq:' .. model .. '\t' .. rank .. '\t' .. t end
local function fckey(model) return PREFIX .. 'fc:' .. model end
-- A counter under FAIR_FORGET tokens counts as none (state.FairForget).
local FAIR_FORGET = 1e-3
-- Counters closer than FAIR_TIE (relative) are equal (state.FairTie).
local FAIR_TIE = 1e-9
local function fair_less(a, b) return a < b - FAIR_TIE * math.max(1, math.abs(b)) end

local function fair_value(model, t, now)
  local rec = redis.call('HGET', fckey(model), t)
  if not rec then return 0 end
  local v, at = string.match(rec, '^(%S+) (%S+)$')
  v, at = tonumber(v), tonumber(at)
  if FAIR_HALF > 0 and now > at then v = v * 0.5 ^ ((now - at) / FAIR_HALF) end
  return v
end

local function fair_set(model, t, v, now)
  redis.call('HSET', fckey(model), t, string.format('%.17g', v) .. ' ' .. now)
end

local function fair_charge(model, t, cost, now)
  fair_set(model, t, fair_value(model, t, now) + cost, now)
end

-- fair_dispatch charges claim id's tenant and keeps what its release may
-- give back: oc per output token of the ot charged.
local function fair_dispatch(id, model, t, cost, oc, ot, now)
  fair_charge(model, t, cost, now)
  if oc > 0 and ot > 0 then
    redis.call('HSET', K_FHELD, id, model .. '\t' .. t .. '\t' .. string.format('%.17g', oc) .. '\t' .. ot)
  end
end

-- fair_settle gives held claim id's tenant back the output it was charged
-- for and did not produce (n tokens; 0: unknown).
local function fair_settle(id, n, now)
  local rec = redis.call('HGET', K_FHELD, id)
  if not rec then return end
  local model, t, oc, ot = string.match(rec, '^(.*)\t(.*)\t(%S+)\t(%d+)$')
  oc, ot = tonumber(oc), tonumber(ot)
  if n <= 0 or n >= ot or oc <= 0 then return end
  fair_set(model, t, math.max(0, fair_value(model, t, now) - (ot - n) * oc), now)
end

-- fair_join queues waiter id of tenant t, lifting t to the least counter
-- of the band's backlogged tenants when it had no waiter there.
local function fair_join(id, model, rank, t, cost, oc, ot, seq, now)
  redis.call('HSET', K_WFAIR, id, t .. '\t' .. string.format('%.17g', cost) .. '\t' .. string.format('%.17g', oc) .. '\t' .. ot)
  local fq = fqkey(model, rank, t)
  if redis.call('ZCARD', fq) == 0 then
    local least = nil
    for _, o in ipairs(redis.call('SMEMBERS', fbkey(model, rank))) do
      local v = fair_value(model, o, now)
      if not least or fair_less(v, least) then least = v end
    end
    if least and fair_less(fair_value(model, t, now), least) then fair_set(model, t, least, now) end
    redis.call('SADD', fbkey(model, rank), t)
  end
  redis.call('ZADD', fq, seq, id)
end

local function fair_waiter(id)
  local rec = redis.call('HGET', K_WFAIR, id)
  if not rec then return nil end
  local t, cost, oc, ot = string.match(rec, '^(.*)\t(%S+)\t(%S+)\t(%d+)$')
  return t, tonumber(cost), tonumber(oc), tonumber(ot)
end

local function fair_leave(id, model, rank)
  local t = fair_waiter(id)
  if not t then return end
  local fq = fqkey(model, rank, t)
  redis.call('ZREM', fq, id)
  if redis.call('ZCARD', fq) == 0 then redis.call('SREM', fbkey(model, rank), t) end
  redis.call('HDEL', K_WFAIR, id)
end

-- fair_prune forgets counters of the model that decayed to nothing and
-- whose tenants wait nowhere, 64 fields a call from a cursor kept beside
-- them, so that ids seen once do not stay forever.
local function fair_prune(model, now)
  if FAIR_HALF <= 0 then return end
  local ck = PREFIX .. 'fcur:' .. model
  local res = redis.call('HSCAN', fckey(model), redis.call('GET', ck) or '0', 'COUNT', 64)
  redis.call('SET', ck, res[1])
  local kv = res[2]
  for i = 1, #kv, 2 do
    local t, waiting = kv[i], false
    for rank = 0, 2 do
      if redis.call('ZCARD', fqkey(model, rank, t)) > 0 then waiting = true end
    end
    if not waiting and fair_value(model, t, now) < FAIR_FORGET then redis.call('HDEL', fckey(model), t) end
  end
end

-- fair_head is the waiter the model's queue dispatches next: in the best
-- non-empty band, the oldest waiter of the tenant with the least counter
-- (ties: the oldest head); a waiter queued with no fair record (an older
-- replica's) when there is none.
local function fair_head(model, now)
  for rank = 0, 2 do
    local best, bestV, bestSeq = nil, nil, nil
    for _, t in ipairs(redis.call('SMEMBERS', fbkey(model, rank))) do
      local h = redis.call('ZRANGE', fqkey(model, rank, t), 0, 0, 'WITHSCORES')
      if h[1] then
        local v, s = fair_value(model, t, now), tonumber(h[2])
        if not best or fair_less(v, bestV) or (not fair_less(bestV, v) and s < bestSeq) then best, bestV, bestSeq = h[1], v, s end
      end
    end
    if best then return best end
  end
  return redis.call('ZRANGE', qkey(model), 0, 0)[1]
end

-- waiter_need is the tokens queued waiter id holds once granted.
local function waiter_need(id)
  local rec = redis.call('HGET', K_WTOK, id)
  if not rec then return 0 end
  local p, d = tok_parse(rec)
  return p + d
end

-- waiter records are "model\trank\treplica".
local function waiter(id)
  local rec = redis.call('HGET', K_WAITERS, id)
  if not rec then return nil end
  local model, rank, replica = string.match(rec, '^(.*)\t(%d)\t(.*)$')
  return model, tonumber(rank), replica
end

local function drop_waiter(id)
  local model, rank = waiter(id)
  if model then
    redis.call('ZREM', qkey(model), id)
    fair_leave(id, model, rank)
  end
  redis.call('HDEL', K_WAITERS, id)
  redis.call('HDEL', K_WTOK, id)
  redis.call('ZREM', K_WLEASES, id)
end

local function notify(replica, msg)
  redis.call('PUBLISH', PREFIX .. 'notify:' .. replica, msg)
end

-- grant hands worker w to waiter id, claiming it under the waiter's id.
local function grant(id, w, now)
  local model, _, replica = waiter(id)
  local t, cost, oc, ot = fair_waiter(id)
  if model and t then fair_dispatch(id, model, t, cost, oc, ot, now) end
  local rec = redis.call('HGET', K_WTOK, id)
  drop_waiter(id)
  inc(w)
  if rec then
    local p, d = tok_parse(rec)
    tok_hold(id, w, p, d)
  end
  redis.call('HSET', K_CLAIMS, id, w)
  redis.call('ZADD', K_LEASES, now + LEASE, id)
  redis.call('HSET', K_GRANTS, id, w)
  if replica then notify(replica, id .. ' ' .. w) end
end

-- pump_worker gives a free slot of worker w to the best-placed waiter
-- (priority, then fair share, then arrival) among the queues of the models w serves, as
-- long as w and the global cap have room: late binding, the waiter takes
-- whichever worker frees first.
local function pump_worker(w, now)
  local models = redis.call('HGET', K_WMODELS, w)
  if not models then return end
  for _ = 1, 64 do
    local room, a = free(w)
    if not room or not global_room() then return end
    -- Each model's fair head; between models, priority then arrival.
    local bestId, bestScore = nil, nil
    for m in string.gmatch(models, '[^\n]+') do
      local head = fair_head(m, now)
      local score = head and tonumber(redis.call('ZSCORE', qkey(m), head))
      if score and (not bestScore or score < bestScore) then
        bestId, bestScore = head, score
      end
    end
    -- Priority order holds: a head waiter past the token limit waits for
    -- room here or on another worker, and no one passes it.
    if not bestId or not tok_room(w, a, waiter_need(bestId)) then return end
    grant(bestId, w, now)
  end
end

-- pump_model grants free slots of the model's workers to its waiters.
local function pump_model(model, now)
  local q = qkey(model)
  for _ = 1, 256 do
    if redis.call('ZCARD', q) == 0 or not global_room() then return end
    local head = fair_head(model, now)
    local need = waiter_need(head)
    local bestW, bestLoad, bestA = nil, nil, nil
    for _, w in ipairs(redis.call('SMEMBERS', PREFIX .. 'model:' .. model)) do
      local ok, a, cap = free(w)
      -- Load 0 with no cap (a / math.huge); ties to the fewest in flight,
      -- then to the lowest id: SMEMBERS has no order (Memory.pumpModel).
      if ok and tok_room(w, a, need) then
        local load = a / cap
        if not bestLoad or load < bestLoad or (load == bestLoad and (a < bestA or (a == bestA and w < bestW))) then
          bestW, bestLoad, bestA = w, load, a
        end
      end
    end
    if not bestW then return end
    grant(head, bestW, now)
  end
end

-- deregister removes a worker from the registry and every per-worker key.
-- Claims on it end normally.
local function deregister(id)
  if redis.call('HEXISTS', K_WORKERS, id) == 0 then return false end
  local models = redis.call('HGET', K_WMODELS, id) or ''
  for m in string.gmatch(models, '[^\n]+') do
    redis.call('SREM', PREFIX .. 'model:' .. m, id)
  end
  for _, k in ipairs({K_WORKERS, K_CAP, K_HEALTH, K_DRAIN, K_OK, K_INFLIGHT, K_WMODELS, K_SOURCE, K_TOKP, K_TOKD, K_TOKA, K_LIM, K_LIMTOK, K_LIMST, K_PHIT}) do
    redis.call('HDEL', k, id)
  end
  redis.call('ZREM', K_WKLEASES, id)
  redis.call('DEL', PREFIX .. 'stats:' .. id, PREFIX .. 'tm:' .. id, PREFIX .. 'hstate:' .. id, PREFIX .. 'mon:' .. id, pkey(id),
    PREFIX .. 'lat:' .. id, adkey(id))
  return true
end

-- purge drops claims whose lease lapsed (their replica stopped renewing:
-- it died), gives their slots back to waiters, and drops waiters whose
-- replica stopped renewing them. Bounded, so no call runs long.
local function purge(now)
  local lapsed = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, 512)
  local freed = {}
  for _, id in ipairs(lapsed) do
    local w = redis.call('HGET', K_CLAIMS, id)
    if w then
      dec(w, id)
      redis.call('HDEL', K_CLAIMS, id)
      freed[w] = true
    end
    redis.call('ZREM', K_LEASES, id)
    redis.call('HDEL', K_GRANTS, id)
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_WLEASES, '-inf', now, 'LIMIT', 0, 512)) do
    drop_waiter(id)
  end
  -- Registered workers whose heartbeats stopped leave the fleet.
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_WKLEASES, '-inf', now, 'LIMIT', 0, 64)) do
    deregister(id)
  end
  for w in pairs(freed) do pump_worker(w, now) end
end

-- health_event is the health state machine, fed by active checks and by
-- what requests meet (passive): healthy → unhealthy after ACTIVE_FAILS
-- failed checks or PASSIVE_FAILS failed requests in a row; unhealthy →
-- recovering on a passing check once HOLD_MS has passed; recovering →
-- healthy on a request it serves (or a second passing check), back to
-- unhealthy on any failure. Returns the new state.
local function health_event(w, ok, passive, now)
  local key = PREFIX .. 'hstate:' .. w
  local cur = redis.call('HGET', K_HEALTH, w)
  if not cur then return nil end
  local st = redis.call('HMGET', key, 'afail', 'pfail', 'since', 'asucc')
  local afail, pfail, since, asucc = tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0, tonumber(st[4]) or 0
  local nxt = cur
  if ok then
    if passive then pfail = 0 else afail, asucc = 0, asucc + 1 end
    if cur == 'unhealthy' and not passive and now - since >= HOLD_MS then
      nxt = 'recovering'
      asucc = 1
    elseif cur == 'recovering' and (passive or asucc >= 2) then
      nxt = 'healthy'
    end
  else
    asucc = 0
    if passive then pfail = pfail + 1 else afail = afail + 1 end
    if cur == 'recovering' or (cur == 'healthy' and (afail >= ACTIVE_FAILS or pfail >= PASSIVE_FAILS)) then
      nxt = 'unhealthy'
    end
  end
  if nxt ~= cur then
    since = now
    if nxt ~= 'unhealthy' then afail, pfail = 0, 0 end
    redis.call('HSET', K_HEALTH, w, nxt)
    refresh_ok(w)
    if nxt == 'unhealthy' then forget_prefixes(w) end
  end
  redis.call('HSET', key, 'afail', afail, 'pfail', pfail, 'since', since, 'asucc', asucc)
  if nxt ~= cur and nxt ~= 'unhealthy' then pump_worker(w, now) end
  return nxt
end
