-- The textbook script, as it is usually written: the baseline floodgate's Lua is measured against.
-- KEYS[1] = zset ; ARGV = limit, window_ms, now_ms, request_id
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3] - ARGV[2])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
