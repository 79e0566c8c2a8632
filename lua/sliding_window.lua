-- Sliding window counter: the previous and current fixed-window counts,
-- weighted by how much of the previous window is still inside the sliding
-- one. State: window index, current count, previous count.

-- Whole requests counted at `e` ms into a window holding counts (p, c).
local function sw_used(p, c, e, window) return floor(p * (window - e) / window + c) end
local function sw_reset(c, p, idx, window)
  if c > 0 then return (idx + 2) * window - now end
  if p > 0 then return (idx + 1) * window - now end
  return 0
end
-- The first ms in [lo, window] at which `sw_used` leaves `room` for the cost.
local function sw_first_fit(p, c, lo, window, room)
  local e = lo
  if p > 0 then
    e = floor(window - (room + 1 - c) * window / p) + 1
    if e < lo then e = lo end
    if e > window then e = window end
  end
  -- The estimate above is exact up to float rounding; settle it by evaluation.
  while e > lo and sw_used(p, c, e - 1, window) <= room do e = e - 1 end
  while e < window and sw_used(p, c, e, window) > room do e = e + 1 end
  return e
end
local function sw_pack(width, idx, c, p)
  -- whole(idx), inlined: a Lua call costs more than the test.
  if idx % 1 == 0 and idx < 1e15 and idx > -1e15 then return format(pack_fmt(width, 2), idx, c, p) end
  local f = pad(width)
  return num(idx) .. format(f, c) .. format(f, p)
end
ALG.sw = function(o, key, limit, window, refund)
  local width = WIDTH[limit] or width_of(limit)
  local idx = floor(now / window)
  local cur, prev = 0, 0
  local v = call('GET', key)
  if v and #v > 2 * width then
    local head = sub(v, 1, -2 * width - 1) + 0
    if head == idx then
      cur, prev = sub(v, -2 * width, -width - 1) + 0, sub(v, -width) + 0
    elseif head == idx - 1 then
      prev = sub(v, -2 * width, -width - 1) + 0
    end
  end
  local elapsed = now - idx * window
  local ttl = (idx + 2) * window - now + SLACK
  if refund then
    -- Take back from the current window first, the rest from the previous one.
    local from_cur = min(cur, cost)
    local c, p = cur - from_cur, max(0, prev - (cost - from_cur))
    put(o, 1, limit, limit - sw_used(p, c, elapsed, window), sw_reset(c, p, idx, window), nil, 0)
    if c ~= cur or p ~= prev then return sw_pack(width, idx, c, p), ttl end
    return
  end
  local u = sw_used(prev, cur, elapsed, window)
  -- A debit takes what fits: the window holds no more than its limit.
  local c = cost
  if debit and u + c > limit then c = max(0, limit - u) end
  if c > 0 and u + c > limit then
    local retry = nil
    if c <= limit then
      local room = limit - c
      if cur + c <= limit then
        retry = idx * window + sw_first_fit(prev, cur, elapsed + 1, window, room) - now
      else
        -- Only in the next window, once this window's count becomes the previous one.
        retry = (idx + 1) * window + sw_first_fit(cur, 0, 0, window, room) - now
      end
    end
    put(o, 0, limit, limit - u, sw_reset(cur, prev, idx, window), retry, 0)
    return
  end
  cur = cur + c
  put(o, 1, limit, limit - sw_used(prev, cur, elapsed, window), sw_reset(cur, prev, idx, window), nil, 0)
  if c > 0 then return sw_pack(width, idx, cur, prev), ttl end
end
-- Jittered: (limit, window, the key's offset).
ALG.swj = jittered(ALG.sw)
EXTRA.swj = 1
