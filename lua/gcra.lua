-- The virtual schedule shared by GCRA, the token bucket and the leaky
-- bucket. One unit of cost takes `interval` ms; `burst` units fit at once
-- from rest (tau = burst * interval). State: the backlog (ms of work not yet
-- drained: the time until the bucket is full, or the queue empty, again)
-- and when it was written. Keeping the backlog rather than an absolute time
-- keeps the numbers small, so fractions of a ms stay exact at any clock.
-- `queue` reports the leaky bucket's delay: the time until what is ahead of
-- an admitted request has drained.
-- EPS: a ns of float rounding never costs a request.
local EPS = 1e-6
local function virtual_schedule(key, burst, interval, refund, queue)
  local tau = burst * interval
  local backlog, ts = 0, now
  local v = redis.call('GET', key)
  if v then
    local s = fields(v)
    backlog, ts = s[1], s[2]
  end
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  backlog = math.max(0, backlog - elapsed)
  if ts < now then ts = now end
  local function remaining(b) return math.floor((tau - b + EPS) / interval) end
  local function store(b)
    return function() redis.call('SET', key, num(b) .. ':' .. num(ts), 'PX', math.ceil(b) + SLACK) end
  end
  if refund then
    local b = math.max(0, backlog - cost * interval)
    return reply(true, burst, remaining(b), b, nil, 0), b ~= backlog and store(b) or nil
  end
  local after = backlog + cost * interval
  if cost > 0 and after - tau > EPS then
    local retry = nil
    if cost <= burst then retry = after - tau end
    return reply(false, burst, remaining(backlog), backlog, retry, 0), nil
  end
  local delay = 0
  if queue then delay = backlog end
  return reply(true, burst, remaining(after), after, nil, delay), cost > 0 and store(after) or nil
end

-- GCRA (generic cell rate algorithm), as go-redis/redis_rate and governor:
-- one emission every `interval` ms, `burst` at once from rest.
ALG.gcra = function(key, burst, interval, refund)
  return virtual_schedule(key, burst, interval, refund, false)
end
