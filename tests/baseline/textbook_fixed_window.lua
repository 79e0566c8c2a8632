-- The textbook script, as it is usually written: the baseline floodgate's Lua is measured against.
-- KEYS[1] = prefix ; ARGV = limit, window_ms, now_ms
local window = math.floor(ARGV[3] / ARGV[2])
local key = KEYS[1] .. ':' .. window
local n = redis.call('INCR', key)
if n == 1 then redis.call('PEXPIRE', key, ARGV[2]) end
return n <= tonumber(ARGV[1]) and 1 or 0
