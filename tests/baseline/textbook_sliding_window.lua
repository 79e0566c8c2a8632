-- The textbook script, as it is usually written: the baseline floodgate's Lua is measured against.
-- KEYS[1] = prefix ; ARGV = limit, window_ms, now_ms
local w = tonumber(ARGV[2]); local now = tonumber(ARGV[3])
local cur = math.floor(now / w)
local cur_key, prev_key = KEYS[1] .. ':' .. cur, KEYS[1] .. ':' .. (cur - 1)
local prev = tonumber(redis.call('GET', prev_key) or '0')
local count = tonumber(redis.call('GET', cur_key) or '0')
local weight = 1 - (now % w) / w                -- share of the previous window still inside the sliding window
if prev * weight + count >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', cur_key); redis.call('PEXPIRE', cur_key, w * 2)
return 1
