-- Sliding window counter: the previous and current fixed-window counts,
-- weighted by how much of the previous window is still inside the sliding
-- one. State: pack(window_index, current, previous).
ALG.sw = function(key, limit, window, refund)
  local width = width_of(limit)
  local idx = math.floor(now / window)
  local cur, prev = 0, 0
  local v = redis.call('GET', key)
  if v then
    local s = unpack_counts(v, width, 2)
    if s[1] == idx then cur, prev = s[2], s[3]
    elseif s[1] == idx - 1 then prev = s[2] end
  end
  local elapsed = now - idx * window
  -- Whole requests counted at `e` ms into a window holding counts (p, c).
  local function used(p, c, e) return math.floor(p * (window - e) / window + c) end
  local function reset_of(c, p)
    if c > 0 then return (idx + 2) * window - now end
    if p > 0 then return (idx + 1) * window - now end
    return 0
  end
  local function store(c, p)
    return function()
      redis.call('SET', key, pack(width, idx, c, p), 'PX', (idx + 2) * window - now + SLACK)
    end
  end
  if refund then
    -- Take back from the current window first, the rest from the previous one.
    local from_cur = math.min(cur, cost)
    local c, p = cur - from_cur, math.max(0, prev - (cost - from_cur))
    local commit = nil
    if c ~= cur or p ~= prev then commit = store(c, p) end
    return reply(true, limit, limit - used(p, c, elapsed), reset_of(c, p), nil, 0), commit
  end
  local room = limit - cost
  -- The first ms in [lo, window] at which `used` leaves room for the cost.
  local function first_fit(p, c, lo)
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
  local u = used(prev, cur, elapsed)
  if cost > 0 and u + cost > limit then
    local retry = nil
    if cost <= limit then
      if cur + cost <= limit then
        retry = idx * window + first_fit(prev, cur, elapsed + 1) - now
      else
        -- Only in the next window, once this window's count becomes the previous one.
        retry = (idx + 1) * window + first_fit(cur, 0, 0) - now
      end
    end
    return reply(false, limit, limit - u, reset_of(cur, prev), retry, 0), nil
  end
  cur = cur + cost
  return reply(true, limit, limit - used(prev, cur, elapsed), reset_of(cur, prev), nil, 0), cost > 0 and store(cur, prev) or nil
end
