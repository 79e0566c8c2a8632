-- Concurrency limit: at most `max` requests in flight per key, across all
-- app servers. KEYS[1] is a sorted set of leases scored by when they
-- expire, so a server that crashes mid-request leaks its slot only until
-- the lease runs out.
-- ARGV[1] = now in ms, or '' for the server's clock (TIME)
-- ARGV[2] = 'acquire' | 'release'
-- ARGV[3] = lease id (unique per request)
-- ARGV[4] = max in flight, ARGV[5] = lease length in ms
-- Reply: {acquired (1/0), max, in flight after, ms until the first lease expires (-1: none)}
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local key, id = KEYS[1], ARGV[3]
local max, lease = tonumber(ARGV[4]), tonumber(ARGV[5])
if ARGV[2] == 'release' then
  redis.call('ZREM', key, id)
  return {1, max, redis.call('ZCARD', key), -1}
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
local function first_expiry()
  local e = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if e[2] then return tonumber(e[2]) - now end
  return -1
end
if n >= max then return {0, max, n, first_expiry()} end
redis.call('ZADD', key, now + lease, id)
-- The set lives as long as its longest lease (plus the usual slack).
redis.call('PEXPIRE', key, lease + 1000)
return {1, max, n + 1, first_expiry()}
