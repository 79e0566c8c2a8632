-- GCRA (generic cell rate algorithm), as go-redis/redis_rate and governor:
-- one emission every `interval` ms, `burst` at once from rest. State: the
-- theoretical arrival time (TAT) in ms.
local burst, interval = tonumber(ARGV[4]), tonumber(ARGV[5])
local tau = burst * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + cost * interval
local allow_at = new_tat - tau
if allow_at > now then
  local retry = nil
  if cost <= burst then retry = allow_at - now end
  return reply(false, burst, math.floor((tau - (tat - now)) / interval), tat - now, retry, 0)
end
if cost > 0 and not dry then
  redis.call('SET', KEYS[1], num(new_tat), 'PX', math.ceil(new_tat - now) + SLACK)
end
return reply(true, burst, math.floor((tau - (new_tat - now)) / interval), new_tat - now, nil, 0)
