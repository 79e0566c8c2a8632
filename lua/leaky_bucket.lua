-- Leaky bucket as a queue (nginx limit_req without nodelay): the level drains
-- at `rate` per second; an admitted request waits until what is ahead of it
-- has drained (its delay); a request is rejected when the queue has no room
-- for its cost. State: "level:timestamp_ms".
local cap, rate = tonumber(ARGV[4]), tonumber(ARGV[5])
local level, ts = 0, now
local v = redis.call('GET', KEYS[1])
if v then
  local s = fields(v)
  level, ts = s[1], s[2]
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
level = math.max(0, level - elapsed / 1000 * rate)
if level + cost > cap then
  local retry = nil
  if cost <= cap then
    retry = math.ceil((level + cost - cap) / rate * 1000)
    while level - retry / 1000 * rate + cost > cap do retry = retry + 1 end
  end
  return reply(false, cap, math.floor(cap - level), level / rate * 1000, retry, 0)
end
local delay = level / rate * 1000
level = level + cost
local reset = level / rate * 1000
if cost > 0 and not dry then
  if ts < now then ts = now end
  redis.call('SET', KEYS[1], num(level) .. ':' .. num(ts), 'PX', math.ceil(reset) + SLACK)
end
return reply(true, cap, math.floor(cap - level), reset, nil, delay)
