-- Fixed window: one counter per aligned window. State: pack(window_index, count).
ALG.fw = function(key, limit, window, refund)
  local width = width_of(limit)
  local idx = math.floor(now / window)
  local reset = (idx + 1) * window - now
  local count = 0
  local v = redis.call('GET', key)
  if v then
    local s = unpack_counts(v, width, 1)
    if s[1] == idx then count = s[2] end
  end
  local function reset_if_used(c) if c > 0 then return reset end return 0 end
  local function store(c)
    return function() redis.call('SET', key, pack(width, idx, c), 'PX', reset + SLACK) end
  end
  if refund then
    local left = math.max(0, count - cost)
    return reply(true, limit, limit - left, reset_if_used(left), nil, 0), left ~= count and store(left) or nil
  end
  if cost > 0 and count + cost > limit then
    local retry = nil
    if cost <= limit then retry = reset end
    return reply(false, limit, limit - count, reset_if_used(count), retry, 0), nil
  end
  count = count + cost
  return reply(true, limit, limit - count, reset_if_used(count), nil, 0), cost > 0 and store(count) or nil
end
