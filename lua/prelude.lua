-- Shared head of the floodgate code. The files of lua/ are joined at compile
-- time (prelude, the six algorithms, then main.lua) into both a Redis
-- Function library and an EVAL script; only definitions run at load, so a
-- library pays for them once, not per call.
--
-- ARGV[1] = now in ms, or '' to read the Redis server's clock (TIME)
-- ARGV[2] = mode: 'check' (charge if admitted), 'peek' (write nothing),
--           'refund' (give `cost` back), or a number: a reservation, a
--           check that may book the cost up to that many ms ahead (GCRA
--           and the token bucket book the earliest time it fits, the leaky
--           bucket admits only when its delay is at most that; the windows
--           and the sliding log decide it as a check), or 'debit' (charge
--           the cost whether it fits or not: GCRA and the buckets go
--           into debt, a window or the log is charged up to its limit),
--           or 'block:<ms>' (GCRA and the buckets refuse a request of
--           cost 1 for that long; the client sends it with cost 0, which
--           leaves a window or the log as it is)
-- ARGV[3] = cost (already clamped to at most limit + 1 by the client)
-- For each KEYS[i] in turn, after ARGV[3]: its algorithm ('fw', ...; 'fw~'
--   in shadow mode), then its parameters: two, or three for the jittered
--   windows ('fwj', 'swj': limit, window, and the key's offset in ms,
--   computed by the client; see EXTRA below).
-- Reply: for each key {allowed, limit, remaining, reset_after_ms, retry_after_ms (-1 = none), delay_ms}

-- Library functions as upvalues, bound by the first call (a library
-- cannot reach them while it loads): a global is a table lookup on every use.
local floor, ceil, max, min, find, format, len, sub, match, tonumber, call
local function bind()
  floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
  find, format, len, sub, match = string.find, string.format, string.len, string.sub, string.match
  tonumber, call = _G.tonumber, redis.call
end
-- Set by each call before any algorithm runs (main.lua). `wait`: a
-- reservation's longest wait in ms, nil for any other mode. `lead`: how
-- far ahead a reservation of several limits is booked (their longest
-- wait, decide() in main.lua), 0 otherwise. `debit`: the mode is 'debit'.
-- `blocked`: a block's time in ms, nil for any other mode.
local now, cost, out
local wait, lead, debit, blocked = nil, 0, false, nil
-- Keys outlive their use by this margin, so a test clock that runs slower
-- than the wall clock never sees state vanish early.
local SLACK = 1000
-- Whole numbers that %d prints as %.15g would.
local function whole(x) return x % 1 == 0 and x < 1e15 and x > -1e15 end
-- Every state number round-trips exactly (tostring keeps only 14 digits),
-- in the shortest of the usual forms: short values take less memory.
local function num(x)
  -- %d: the same digits, without float formatting (whole(), inlined: a
  -- Lua call costs more than the test).
  if x % 1 == 0 and x < 1e15 and x > -1e15 then return format('%d', x) end
  local s = format('%.15g', x)
  if tonumber(s) ~= x then s = format('%.17g', x) end
  return s
end
-- Writes one key's reply into out[o + 1 .. o + 6]; no table per key.
-- Durations leave as whole ms rounded up (a client that waits them is never
-- early), 0 when not positive.
local function put(o, allowed, limit, remaining, reset, retry, delay)
  if remaining < 0 then remaining = 0 end
  out[o + 1] = allowed
  out[o + 2] = limit
  out[o + 3] = remaining
  if reset <= 0 then out[o + 4] = 0 else out[o + 4] = ceil(reset) end
  if not retry then out[o + 5] = -1
  elseif retry <= 0 then out[o + 5] = 0 else out[o + 5] = ceil(retry) end
  if delay <= 0 then out[o + 6] = 0 else out[o + 6] = ceil(delay) end
end
-- '%0<width>d' for each width, made once: a number joined to a string is
-- printed as a float.
local PAD = {}
local function pad(width)
  local f = PAD[width]
  if not f then f = '%0' .. width .. 'd'; PAD[width] = f end
  return f
end
-- pack(width, head, counts...) as one format call when the head is whole
-- (num() would print it with %d too): '%d' then `n` padded counts.
local PACK = {}
local function pack_fmt(width, n)
  local k = width * 2 + n
  local f = PACK[k]
  if not f then f = '%d' .. string.rep(pad(width), n); PACK[k] = f end
  return f
end
-- Counters are packed into one integer, the window index then each count in
-- as many digits as the limit has, so Redis stores the value as a bare integer.
-- Remembered for each limit met (a limiter's own, so a handful): a table
-- lookup costs less than the call and the count. The windows look in WIDTH
-- themselves and call width_of() only on a miss (a Lua call costs more than
-- the lookup); the sliding log calls it at once, so it looks too.
local WIDTH = {}
local function width_of(limit)
  local w = WIDTH[limit]
  if w then return w end
  -- Counted, not printed: formatting costs more than the whole decision.
  local p
  w, p = 1, 10
  while limit >= p do w, p = w + 1, p * 10 end
  WIDTH[limit] = w
  return w
end
-- Each algorithm: ALG.name(o, key, p1, p2, refund, p3) puts its reply at `o`
-- and returns what to write if every key admits (main.lua writes it): a
-- string value and its TTL in ms for SET, or a sliding log's LOG_ADD /
-- LOG_DROP, its count and (LOG_ADD) the entries to add; nothing when
-- nothing changes. `p3` is the third
-- parameter of an algorithm that takes one (EXTRA), nil for the others.
local ALG = {}
local LOG_ADD, LOG_DROP = 1, 2
-- The parameters an algorithm takes beyond two (none unless listed).
local EXTRA = {}
-- `alg` with its windows starting `p3` ms past the aligned ones: the same
-- code on a clock `p3` behind, so windows start at k * window + p3 and every
-- duration it answers (a difference of times) is the shifted window's.
local function jittered(alg)
  return function(o, key, p1, p2, refund, p3)
    local at = now
    now = now - p3
    local w, t = alg(o, key, p1, p2, refund)
    now = at
    return w, t
  end
end
