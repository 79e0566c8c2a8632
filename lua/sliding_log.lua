-- Sliding log: a sorted set with one member per admitted request, scored by
-- its time. Entries at or before now - window no longer count. Rejected
-- requests are never recorded.
local limit, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local key, cut = KEYS[1], now - window
local count = redis.call('ZCOUNT', key, '(' .. num(cut), '+inf')
if count + cost > limit then
  local retry, reset = nil, 0
  if count > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) + window - now
  end
  if cost <= limit then
    -- The request fits once the (count + cost - limit)-th oldest entry leaves.
    local k = count + cost - limit
    local e = redis.call('ZRANGEBYSCORE', key, '(' .. num(cut), '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    retry = tonumber(e[2]) + window - now
  end
  return reply(false, limit, limit - count, reset, retry, 0)
end
if cost > 0 and not dry then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(cut))
  -- Unique members that listpack stores as small integers: two live entries
  -- are less than a window apart, so (now mod 2*window) tells their times
  -- apart, and count + i tells apart the ones with the same time.
  local base = (now % (2 * window)) * limit + count
  local i = 0
  while i < cost do
    -- Batches keep unpack() within Lua's stack limit for large costs.
    local args = {}
    local stop = math.min(cost, i + 500)
    while i < stop do
      args[#args + 1] = num(now)
      args[#args + 1] = num(base + i)
      i = i + 1
    end
    redis.call('ZADD', key, unpack(args))
  end
  redis.call('PEXPIRE', key, window + SLACK)
end
local reset = 0
if count + cost > 0 then reset = window end
if cost == 0 and count > 0 then
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  reset = tonumber(newest[2]) + window - now
end
return reply(true, limit, limit - count - cost, reset, nil, 0)
