-- Sliding log: a sorted set with one member per admitted request, scored by
-- its time. Entries at or before now - window no longer count. Rejected
-- requests are never recorded.
-- Ranks and counts go to Redis as strings: a number argument is printed
-- as %.17g.
local function sl_score(key, rank)
  return call('ZRANGE', key, rank, rank, 'WITHSCORES')[2] + 0
end
ALG.sl = function(o, key, limit, window, refund)
  local after = '(' .. num(now - window)
  local count = call('ZCOUNT', key, after, '+inf')
  if refund then
    -- Give back the newest entries: those of the request being refunded.
    local n = min(cost, count)
    local reset = 0
    if count - n > 0 then reset = sl_score(key, -n - 1) + window - now end
    put(o, 1, limit, limit - (count - n), reset, nil, 0)
    if n > 0 then return LOG_DROP, n end
    return
  end
  if cost > 0 and count + cost > limit then
    local retry, reset = nil, 0
    if count > 0 then reset = sl_score(key, '-1') + window - now end
    if cost <= limit then
      -- The request fits once the (count + cost - limit)-th oldest entry
      -- leaves; when that is the newest one (cost = limit), it is known.
      local k = count + cost - limit
      if k == count then
        retry = reset
      else
        local e = call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', format('%d', k - 1), '1')
        retry = e[2] + window - now
      end
    end
    put(o, 0, limit, limit - count, reset, retry, 0)
    return
  end
  local reset = 0
  if count + cost > 0 then reset = window end
  if cost == 0 and count > 0 then reset = sl_score(key, '-1') + window - now end
  put(o, 1, limit, limit - count - cost, reset, nil, 0)
  if cost > 0 then return LOG_ADD, count end
end

-- The write of an admitted request: drop what has left the window, add one
-- member per unit of cost. Members are unique and stored by listpack as
-- small integers: two live entries are less than a window apart, so
-- (now mod 2*window) tells their times apart, and the sequence count + i,
-- padded to the limit's width, the ones with the same time, in order (a
-- refund removes the highest).
local function sl_add(key, limit, window, count)
  call('ZREMRANGEBYSCORE', key, '-inf', num(now - window))
  local at = num(now)
  local head = num(now % (2 * window))
  local f = pad(width_of(limit))
  if cost == 1 then
    call('ZADD', key, at, head .. format(f, count))
  else
    local i = 0
    while i < cost do
      -- Batches keep unpack() within Lua's stack limit for large costs.
      local args = {}
      local stop = min(cost, i + 500)
      while i < stop do
        args[#args + 1] = at
        args[#args + 1] = head .. format(f, count + i)
        i = i + 1
      end
      call('ZADD', key, unpack(args))
    end
  end
  call('PEXPIRE', key, format('%d', window + SLACK))
end
