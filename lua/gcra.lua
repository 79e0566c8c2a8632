-- The virtual schedule shared by GCRA, the token bucket and the leaky
-- bucket. State: one time, the theoretical arrival time (TAT): when the
-- bucket is full again (the queue empty). One unit of cost takes `interval`
-- ms; `burst` units fit at once from rest (tau = burst * interval).
-- `queue` reports the leaky bucket's delay: the time until what is ahead of
-- an admitted request has drained.
local function virtual_schedule(key, burst, interval, refund, queue)
  local tau = burst * interval
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local function remaining(t) return math.floor((tau - (t - now)) / interval) end
  local function store(t)
    return function() redis.call('SET', key, num(t), 'PX', math.ceil(t - now) + SLACK) end
  end
  if refund then
    local t = math.max(now, tat - cost * interval)
    return reply(true, burst, remaining(t), t - now, nil, 0), t ~= tat and store(t) or nil
  end
  local new_tat = tat + cost * interval
  local allow_at = new_tat - tau
  if allow_at > now then
    local retry = nil
    if cost <= burst then retry = allow_at - now end
    return reply(false, burst, remaining(tat), tat - now, retry, 0), nil
  end
  local delay = 0
  if queue then delay = tat - now end
  return reply(true, burst, remaining(new_tat), new_tat - now, nil, delay), cost > 0 and store(new_tat) or nil
end

-- GCRA (generic cell rate algorithm), as go-redis/redis_rate and governor:
-- one emission every `interval` ms, `burst` at once from rest.
ALG.gcra = function(key, burst, interval, refund)
  return virtual_schedule(key, burst, interval, refund, false)
end
