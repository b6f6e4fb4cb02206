/**
 * The Lua scripts of the worker mode's shared rate (`src/worker/rate.ts`): the pacing bucket and
 * the estimator kept in Redis, run by Redis on its own clock, atomically for every worker.
 *
 * @module
 */

/*
 * KEYS[1] is the shared bucket and estimator (a hash), KEYS[2] the times of the latest grants, the
 * latest first (a list): one API key's pair (`rateKeys` in rate.ts), under one hash tag, never
 * touched together with a queue's keys.
 */
/** Grant times kept for the window estimate. */
const GRANTS_KEPT = 512;
/** The shared state is forgotten after this long unused: a run days later learns afresh. */
const IDLE_EXPIRE_MS = 6 * 3600 * 1000;

/**
 * The Lua copy of the pure estimator (`src/api/rate-estimator.ts`), function for function: the
 * settings (`ARGV[1..7]`), `clamp` (`clampRate`), `probe_rate` (`probeRate`), `window_estimate`
 * (`windowEstimate`), `learn` (`nextEstimate`, without the shared-key mode: every worker reads the
 * one estimate kept here) and `congestion` (what `RateEstimator.congestion` does with them). Exported so that the shared test vectors
 * (test/worker/rate-vectors.test.ts) run this very text on a real Redis.
 */
export const ESTIMATOR_LUA = `
local initial, minr, maxr = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local hold, probe, quietS, quietGain = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local function clamp(x) return math.min(maxr, math.max(minr, x)) end
local function probe_rate(est, tau)
  local quiet = math.max(0, tau - math.max(quietS, 30 / est))
  return clamp(est * (hold + probe * tau + quietGain * quiet * quiet))
end
-- times: the accepted requests' times since the last event, the latest first.
local function window_estimate(times, now, burstS)
  local best = nil
  for k, at in ipairs(times) do
    local r = (k + 0.5) / ((now - tonumber(at)) / 1000 + burstS)
    if best == nil or r > best then best = r end
  end
  return best
end
local function learn(est, accepted, elapsed, busy, windowed)
  if not est then
    est = math.max(windowed or 0, initial * 0.25)
  elseif accepted < 4 or elapsed < 2000 then
    est = est * 0.8
  else
    local sample = accepted / (elapsed / 1000)
    if windowed and windowed > sample * 1.1 then sample = windowed end
    if busy < elapsed / 2 then
      est = math.min(est, math.max(sample, est * 0.85))
    else
      est = sample
    end
  end
  return clamp(est)
end
-- A congestion event: the new estimate and the rate held just under it.
local function congestion(est, accepted, elapsed, busy, times, now, burstS)
  est = learn(est, accepted, elapsed, busy, window_estimate(times, now, burstS))
  return est, clamp(est * hold)
end
`;

// Shared by both scripts: the estimator, the clock, the fields, the probe rate.
const PRELUDE = `${ESTIMATOR_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'rate', 'tokens', 'ts', 'pause_until', 'estimate', 'seq',
  'busy_ms', 'busy_at', 'event_at', 'event_seq')
local rate = tonumber(h[1]) or clamp(initial)
local tokens = tonumber(h[2])
local ts = tonumber(h[3]) or now
local pause = tonumber(h[4]) or 0
local est = tonumber(h[5])
local seq = tonumber(h[6]) or 0
local busy = tonumber(h[7]) or 0
local busyAt = tonumber(h[8]) or 0
local eventAt = tonumber(h[9])
local eventSeq = tonumber(h[10]) or 0
local function capacity(r) return math.max(1, math.min(10, r / 2)) end
if tokens == nil then tokens = math.min(2, capacity(rate)) end
if est then
  rate = probe_rate(est, busy / 1000)
else
  rate = clamp(rate)
end
local function save()
  redis.call('HSET', KEYS[1], 'rate', tostring(rate), 'tokens', tostring(tokens), 'ts', tostring(ts),
    'pause_until', tostring(pause), 'seq', tostring(seq), 'busy_ms', tostring(busy), 'busy_at', tostring(busyAt),
    'event_seq', tostring(eventSeq))
  if est then redis.call('HSET', KEYS[1], 'estimate', tostring(est)) end
  if eventAt then redis.call('HSET', KEYS[1], 'event_at', tostring(eventAt)) end
  redis.call('PEXPIRE', KEYS[1], ${IDLE_EXPIRE_MS})
  redis.call('PEXPIRE', KEYS[2], ${IDLE_EXPIRE_MS})
end
-- Demand above the rate ("in use"): consecutive takes that find the bucket short, within 1 s.
local function markBusy(inUse)
  if inUse then
    if busyAt > 0 and now - busyAt <= 1000 then busy = busy + (now - busyAt) end
    busyAt = now
  else
    busyAt = 0
  end
end
`;

/** Takes one token: `{1, seq, rate, estimate}` or `{0, wait ms, rate, estimate}` (numbers as strings). */
export const TAKE = `${PRELUDE}
if now < pause then
  return {0, tostring(pause - now), tostring(rate), tostring(est or -1)}
end
tokens = math.min(capacity(rate), tokens + math.max(0, now - ts) / 1000 * rate)
ts = math.max(ts, now)
if tokens >= 1 then
  tokens = tokens - 1
  seq = seq + 1
  local inUse = tokens < 1
  markBusy(inUse)
  -- Slow start until the first 429: +1 req/s per request while in use (doubles per second).
  if inUse and not est then rate = clamp(rate + 1) end
  redis.call('LPUSH', KEYS[2], tostring(now))
  redis.call('LTRIM', KEYS[2], 0, ${GRANTS_KEPT - 1})
  save()
  return {1, tostring(seq), tostring(rate), tostring(est or -1)}
end
markBusy(true)
save()
return {0, tostring((1 - tokens) / rate * 1000), tostring(rate), tostring(est or -1)}
`;

/**
 * A 429 for the request granted as `ARGV[8]`, with a pause of `ARGV[9]` ms: pause everyone, and
 * learn when it is a new congestion event (granted after the last event and answered after its
 * pause; the rest of a burst is the same event). Returns `{new event 0/1, rate, estimate, pause ms}`.
 */
export const LIMITED = `${PRELUDE}
local ticket, pauseMs, burstS = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local oldPause = pause
pause = math.max(pause, now + pauseMs)
-- One request probes when the pause ends; the rest follow at the new rate.
tokens = math.min(tokens, 1)
ts = math.max(ts, pause)
local fresh = ticket > eventSeq and now >= oldPause
if fresh then
  local accepted = math.max(0, ticket - 1 - eventSeq)
  local elapsed = eventAt and (now - eventAt) or 0
  local times = {}
  if accepted > 0 then times = redis.call('LRANGE', KEYS[2], 0, math.min(accepted, ${GRANTS_KEPT}) - 1) end
  est, rate = congestion(est, accepted, elapsed, busy, times, now, burstS)
  eventAt = now
  eventSeq = seq
  busy = 0
end
save()
return {fresh and 1 or 0, tostring(rate), tostring(est or -1), tostring(pause - now)}
`;
