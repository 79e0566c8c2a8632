-- Fixed window: one counter per aligned window. State: pack(window_index, count).
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local idx = math.floor(now / window)
local reset = (idx + 1) * window - now
local count = 0
local v = redis.call('GET', KEYS[1])
if v then
  local s = unpack_counts(v, 1)
  if s[1] == idx then count = s[2] end
end
if count + cost > limit then
  local retry = nil
  if cost <= limit then retry = reset end
  return reply(false, limit, limit - count, count > 0 and reset or 0, retry, 0)
end
count = count + cost
if cost > 0 and not dry then
  redis.call('SET', KEYS[1], pack(idx, count), 'PX', reset + SLACK)
end
return reply(true, limit, limit - count, count > 0 and reset or 0, nil, 0)
