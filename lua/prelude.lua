-- Shared head of every floodgate script (prepended at compile time).
-- ARGV[1] = now in ms, or '' to read the Redis server's clock (TIME)
-- ARGV[2] = cost (already clamped to at most limit + 1 by the client)
-- ARGV[3] = '1' for a dry run (peek): decide, write nothing
-- ARGV[4], ARGV[5] = the algorithm's parameters
-- Reply: {allowed, limit, remaining, reset_after_ms, retry_after_ms (-1 = none), delay_ms}
local now = tonumber(ARGV[1])
if not now then
  -- Redis 7 replicates effects, so reading TIME before writing is safe.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local cost = tonumber(ARGV[2])
local dry = ARGV[3] == '1'
-- Keys outlive their use by this margin, so a test clock that runs slower
-- than the wall clock never sees state vanish early.
local SLACK = 1000
-- Every state number round-trips exactly (tostring keeps only 14 digits),
-- in the shortest of the usual forms: short values take less memory.
local function num(x)
  local s = string.format('%.15g', x)
  if tonumber(s) ~= x then s = string.format('%.17g', x) end
  return s
end
-- Counters are packed into one integer, `head` then each count in as many
-- digits as the limit has, so Redis stores the value as a bare integer.
local width = string.len(ARGV[4])
local function pack(head, ...)
  local s = num(head)
  for _, n in ipairs({...}) do s = s .. string.format('%0' .. width .. 'd', n) end
  return s
end
-- The inverse of pack(): `head` and `n` counts.
local function unpack_counts(v, n)
  local out = {tonumber(string.sub(v, 1, -n * width - 1)) or -1}
  for i = n, 1, -1 do
    out[#out + 1] = tonumber(string.sub(v, -i * width, -(i - 1) * width - 1))
  end
  return out
end
-- Durations leave as whole ms rounded up: a client that waits them is never early.
local function ms(x) if x <= 0 then return 0 end return math.ceil(x) end
local function reply(allowed, limit, remaining, reset, retry, delay)
  local r = -1
  if retry then r = ms(retry) end
  if remaining < 0 then remaining = 0 end
  return {allowed and 1 or 0, limit, remaining, ms(reset), r, ms(delay)}
end
-- Bucket state is one string of numbers joined by ':'.
local function fields(v)
  local out = {}
  for part in string.gmatch(v, '[^:]+') do out[#out + 1] = tonumber(part) end
  return out
end
