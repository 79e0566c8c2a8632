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
  -- A debit takes what fits: the log holds no more than its limit.
  local c = cost
  if debit and count + c > limit then c = max(0, limit - count) end
  if c > 0 and count + c > limit then
    local retry, reset = nil, 0
    if count > 0 then reset = sl_score(key, '-1') + window - now end
    if c <= limit then
      -- The request fits once the (count + c - limit)-th oldest entry
      -- leaves; when that is the newest one (c = limit), it is known.
      local k = count + c - limit
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
  if count + c > 0 then reset = window end
  if c == 0 and count > 0 then reset = sl_score(key, '-1') + window - now end
  put(o, 1, limit, limit - count - c, reset, nil, 0)
  if c > 0 then return LOG_ADD, count, c end
end

-- The write of an admitted request: drop what has left the window, add one
-- member per unit of its cost (`n`). Members are unique and stored by listpack as
-- small integers: two live entries are less than a window apart, so
-- (now mod 2*window) tells their times apart, and the sequence count + i,
-- padded to the limit's width, the ones with the same time, in order (a
-- refund removes the highest).
local function sl_add(key, limit, window, count, n)
  call('ZREMRANGEBYSCORE', key, '-inf', num(now - window))
  local at = num(now)
  local head = num(now % (2 * window))
  local f = pad(width_of(limit))
  if n == 1 then
    call('ZADD', key, at, head .. format(f, count))
  else
    local i = 0
    while i < n do
      -- Batches keep unpack() within Lua's stack limit for large costs.
      local args = {}
      local stop = min(n, i + 500)
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
