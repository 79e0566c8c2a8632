-- Shared head of the floodgate script (the files of lua/ are joined at
-- compile time: prelude, the six algorithms, then main.lua).
--
-- ARGV[1] = now in ms, or '' to read the Redis server's clock (TIME)
-- ARGV[2] = mode: 'check' (charge if admitted), 'peek' (write nothing),
--           'refund' (give `cost` back)
-- ARGV[3] = cost (already clamped to at most limit + 1 by the client)
-- For each KEYS[i]: ARGV[3i + 1] = algorithm, ARGV[3i + 2], ARGV[3i + 3] = its parameters.
-- Reply: for each key {allowed, limit, remaining, reset_after_ms, retry_after_ms (-1 = none), delay_ms}
local now = tonumber(ARGV[1])
if not now then
  -- Redis 7 replicates effects, so reading TIME before writing is safe.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local mode = ARGV[2]
local cost = tonumber(ARGV[3])
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
-- Counters are packed into one integer, `head` then each count in as many
-- digits as the limit has, so Redis stores the value as a bare integer.
local function width_of(limit) return string.len(string.format('%d', limit)) end
local function pack(width, head, ...)
  local s = num(head)
  for _, n in ipairs({...}) do s = s .. string.format('%0' .. width .. 'd', n) end
  return s
end
-- The inverse of pack(): `head` and `n` counts.
local function unpack_counts(v, width, n)
  local out = {tonumber(string.sub(v, 1, -n * width - 1)) or -1}
  for i = n, 1, -1 do
    out[#out + 1] = tonumber(string.sub(v, -i * width, -(i - 1) * width - 1))
  end
  return out
end
-- Each algorithm: ALG.name(key, p1, p2, refund) returns its reply and a
-- function that writes its new state (nil when nothing changes).
local ALG = {}
