-- One decision: decide every key first, write only if all admit, so several
-- limits are charged all or nothing.
-- A limit in shadow mode comes as its algorithm's name and `~`: decided as
-- any, written when it admits and the others do, but its denial stops no
-- other limit's charge (the client denies nothing for it).
local SHADOW = {}
do
  local tags = {'fw', 'fwj', 'sl', 'sw', 'swj', 'tb', 'lb', 'gcra'}
  for i = 1, #tags do
    local name = tags[i] .. '~'
    ALG[name], SHADOW[name], EXTRA[name] = ALG[tags[i]], true, EXTRA[tags[i]]
  end
end
local function write(key, w, t, limit, window, n)
  if w == LOG_ADD then
    sl_add(key, limit, window, t, n)
  elseif w == LOG_DROP then
    call('ZREMRANGEBYRANK', key, -t, -1)
  else
    -- A whole number as %d: Redis would print a number argument as %.17g.
    call('SET', key, w, 'PX', format('%d', t))
  end
end
-- The server's clock, read once per call: every request of a many() call
-- is decided at the same instant.
local call_now
-- One request: its `n` keys start after KEYS[k], its arguments after
-- ARGV[a] (0 and 0 for a call of its own); its reply goes into `into`
-- after index `o` (many() gives every request the one table it answers),
-- or into a table of its own.
local function decide(KEYS, ARGV, k, a, n, into, o)
  -- ARGV are numbers written by the client: `+ 0` parses them once, where
  -- tonumber() parses twice.
  if ARGV[a + 1] ~= '' then
    now = ARGV[a + 1] + 0
  else
    if not call_now then
      -- Redis 7 replicates effects, so reading TIME before writing is safe.
      local t = call('TIME')
      call_now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
    end
    now = call_now
  end
  local mode = ARGV[a + 2]
  cost = ARGV[a + 3] + 0
  local refund = mode == 'refund'
  -- A reservation: a check that may book up to `wait` ms ahead. A debit:
  -- a charge that never denies.
  wait, lead, debit, blocked = nil, 0, false, nil
  if mode ~= 'check' and not refund and mode ~= 'peek' then
    if mode == 'debit' then
      debit = true
    elseif type(mode) == 'string' and sub(mode, 1, 6) == 'block:' then
      blocked = sub(mode, 7) + 0
    else
      wait = mode + 0
    end
    mode = 'check'
  end
  if n == 1 then
    -- Sized at once: no rehash while the reply is put.
    out = into or {0, 0, 0, 0, 0, 0}
    local key, p1, p2 = KEYS[k + 1], ARGV[a + 5] + 0, ARGV[a + 6] + 0
    -- A third parameter only for an algorithm that takes one: the
    -- buckets' code reads a sixth argument of its own.
    local alg = ARGV[a + 4]
    local w, t, added = ALG[alg](o, key, p1, p2, refund, EXTRA[alg] and ARGV[a + 7])
    if w and out[o + 1] == 1 and mode ~= 'peek' then
      if w == LOG_ADD or w == LOG_DROP then
        write(key, w, t, p1, p2, added)
      else
        call('SET', key, w, 'PX', format('%d', t))
      end
    end
    return out
  end
  out = into or {}
  -- bs[i]: where key i's algorithm is, less one (each takes its name, two
  -- parameters, and its EXTRA).
  local ws, ts, ns, bs, all, b = {}, {}, {}, {}, true, a + 3
  for i = 1, n do
    local alg = ARGV[b + 1]
    bs[i] = b
    ws[i], ts[i], ns[i] = ALG[alg](o + 6 * (i - 1), KEYS[k + i], ARGV[b + 2] + 0, ARGV[b + 3] + 0, refund, EXTRA[alg] and ARGV[b + 4])
    if out[o + 6 * i - 5] == 0 and not SHADOW[alg] then all = false end
    b = b + 3 + (EXTRA[alg] or 0)
  end
  -- A reservation waits for the longest of its limits: each schedule is
  -- decided again as booked then (a leaky bucket may then have no room),
  -- and charged from then on, so that none sees the cost before its time.
  -- Whole ms, as the replies say them (and as the twin reads them).
  if all and wait then
    local w = 0
    for i = 1, n do
      local d = out[o + 6 * i]
      if not SHADOW[ARGV[bs[i] + 1]] and d > w then w = d end
    end
    if w > 0 then
      lead = w
      for i = 1, n do
        local b = bs[i]
        local alg = ARGV[b + 1]
        ws[i], ts[i], ns[i] = ALG[alg](o + 6 * (i - 1), KEYS[k + i], ARGV[b + 2] + 0, ARGV[b + 3] + 0, false, EXTRA[alg] and ARGV[b + 4])
        if out[o + 6 * i - 5] == 0 and not SHADOW[alg] then all = false end
      end
      lead = 0
    end
  end
  if all and mode ~= 'peek' then
    for i = 1, n do
      local b = bs[i]
      if ws[i] and out[o + 6 * i - 5] == 1 then write(KEYS[k + i], ws[i], ts[i], ARGV[b + 2] + 0, ARGV[b + 3] + 0, ns[i]) end
    end
  end
  return out
end
local function floodgate(KEYS, ARGV)
  if not call then bind() end
  call_now = nil
  return decide(KEYS, ARGV, 0, 0, #KEYS, nil, 0)
end
-- Many decisions in one call: each request all or nothing by itself, and
-- apart from the others (one's denial or error never charges or denies
-- another). Requests of one limiter at one moment send the same ARGV, so
-- each distinct ARGV comes once, its numbers parsed once, and a request
-- names its own by number. ARGV[1] = m requests, ARGV[2] = u distinct
-- ARGV; then each of the u as its length and its arguments (as
-- floodgate() takes them); then, for each request j, the number of its
-- ARGV (none when u = 1: every request has the one). Request j's keys
-- follow request j - 1's (as many as its ARGV has limits). Reply: one
-- array, each request's part in turn: its reply as floodgate() gives it
-- (six numbers a key), or in one place an error for it alone. (An array
-- of arrays would cost Redis more: it looks for the fields of special
-- replies, `err`, `ok`, `double` and four more, in every table it
-- answers.)
local function many(KEYS, ARGV)
  if not call then bind() end
  call_now = nil
  local m, u = ARGV[1] + 0, ARGV[2] + 0
  local lists, keys, a = {}, {}, 2
  for i = 1, u do
    local na = ARGV[a + 1] + 0
    local list = {}
    -- Numbers become numbers here, once; the mode, the algorithms' names
    -- and '' (the server's clock) stay strings: decide() reads both.
    for x = 1, na do
      local v = ARGV[a + 1 + x]
      list[x] = tonumber(v) or v
    end
    -- Its keys: one per algorithm named after list[3] (see decide()).
    local nk, b = 0, 3
    while b < na do
      nk = nk + 1
      b = b + 3 + (EXTRA[list[b + 1]] or 0)
    end
    lists[i], keys[i] = list, nk
    a = a + 1 + na
  end
  local replies, o, k = {}, 0, 0
  for j = 1, m do
    local l = 1
    if u > 1 then l = ARGV[a + j] + 0 end
    local list, nk = lists[l], keys[l]
    -- decide() writes only after deciding every key: an error leaves its
    -- request's keys as they were.
    local ok, r = pcall(decide, KEYS, list, k, 0, nk, replies, o)
    k = k + nk
    if ok then
      o = o + 6 * nk
    else
      -- What it put before the error goes; the error takes one place.
      for i = o + 2, o + 6 * nk do replies[i] = nil end
      if type(r) == 'table' and r.err then
        replies[o + 1] = r
      else
        replies[o + 1] = {err = tostring(r)}
      end
      o = o + 1
    end
  end
  return replies
end
