-- Sliding window counter: the previous and current fixed-window counts,
-- weighted by how much of the previous window is still inside the sliding
-- one. State: pack(window_index, current, previous).
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local idx = math.floor(now / window)
local cur, prev = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local s = unpack_counts(v, 2)
  if s[1] == idx then cur, prev = s[2], s[3]
  elseif s[1] == idx - 1 then prev = s[2] end
end
local elapsed = now - idx * window
-- Whole requests counted at `e` ms into a window holding counts (p, c).
local function used(p, c, e) return math.floor(p * (window - e) / window + c) end
-- The first ms in [lo, window] at which `used` leaves room for the cost.
local function first_fit(p, c, lo)
  local room = limit - cost
  local e = lo
  if p > 0 then
    e = math.floor(window - (room + 1 - c) * window / p) + 1
    if e < lo then e = lo end
    if e > window then e = window end
  end
  -- The estimate above is exact up to float rounding; settle it by evaluation.
  while e > lo and used(p, c, e - 1) <= room do e = e - 1 end
  while e < window and used(p, c, e) > room do e = e + 1 end
  return e
end
local function reset_of(c, p)
  if c > 0 then return (idx + 2) * window - now end
  if p > 0 then return (idx + 1) * window - now end
  return 0
end
local u = used(prev, cur, elapsed)
if u + cost > limit then
  local retry = nil
  if cost <= limit then
    if cur + cost <= limit then
      retry = idx * window + first_fit(prev, cur, elapsed + 1) - now
    else
      -- Only in the next window, once this window's count becomes the previous one.
      retry = (idx + 1) * window + first_fit(cur, 0, 0) - now
    end
  end
  return reply(false, limit, limit - u, reset_of(cur, prev), retry, 0)
end
cur = cur + cost
if cost > 0 and not dry then
  redis.call('SET', KEYS[1], pack(idx, cur, prev), 'PX', (idx + 2) * window - now + SLACK)
end
return reply(true, limit, limit - used(prev, cur, elapsed), reset_of(cur, prev), nil, 0)
