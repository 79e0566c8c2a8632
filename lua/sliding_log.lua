-- Sliding log: a sorted set with one member per admitted request, scored by
-- its time. Entries at or before now - window no longer count. Rejected
-- requests are never recorded.
ALG.sl = function(key, limit, window, refund)
  local cut = now - window
  local count = redis.call('ZCOUNT', key, '(' .. num(cut), '+inf')
  local function newest_reset()
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return tonumber(newest[2]) + window - now
  end
  if refund then
    -- Give back the newest entries: those of the request being refunded.
    local n = math.min(cost, count)
    local reset = 0
    if count - n > 0 then
      local e = redis.call('ZRANGE', key, -n - 1, -n - 1, 'WITHSCORES')
      reset = tonumber(e[2]) + window - now
    end
    local commit = nil
    if n > 0 then commit = function() redis.call('ZREMRANGEBYRANK', key, -n, -1) end end
    return reply(true, limit, limit - (count - n), reset, nil, 0), commit
  end
  if cost > 0 and count + cost > limit then
    local retry, reset = nil, 0
    if count > 0 then reset = newest_reset() end
    if cost <= limit then
      -- The request fits once the (count + cost - limit)-th oldest entry leaves.
      local k = count + cost - limit
      local e = redis.call('ZRANGEBYSCORE', key, '(' .. num(cut), '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
      retry = tonumber(e[2]) + window - now
    end
    return reply(false, limit, limit - count, reset, retry, 0), nil
  end
  local reset = 0
  if count + cost > 0 then reset = window end
  if cost == 0 and count > 0 then reset = newest_reset() end
  local commit = nil
  if cost > 0 then
    commit = function()
      redis.call('ZREMRANGEBYSCORE', key, '-inf', num(cut))
      -- Unique members that listpack stores as small integers: two live
      -- entries are less than a window apart, so (now mod 2*window) tells
      -- their times apart, and the sequence count + i, padded to the
      -- limit's width, the ones with the same time, in order (a refund
      -- removes the highest).
      local width = width_of(limit)
      local i = 0
      while i < cost do
        -- Batches keep unpack() within Lua's stack limit for large costs.
        local args = {}
        local stop = math.min(cost, i + 500)
        while i < stop do
          args[#args + 1] = num(now)
          args[#args + 1] = pack(width, now % (2 * window), count + i)
          i = i + 1
        end
        redis.call('ZADD', key, unpack(args))
      end
      redis.call('PEXPIRE', key, window + SLACK)
    end
  end
  return reply(true, limit, limit - count - cost, reset, nil, 0), commit
end
