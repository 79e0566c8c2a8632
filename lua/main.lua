-- One decision: decide every key first, write only if all admit, so several
-- limits are charged all or nothing.
local function write(key, w, t, limit, window)
  if w == LOG_ADD then
    sl_add(key, limit, window, t)
  elseif w == LOG_DROP then
    call('ZREMRANGEBYRANK', key, -t, -1)
  else
    -- A whole number as %d: Redis would print a number argument as %.17g.
    call('SET', key, w, 'PX', format('%d', t))
  end
end
local function floodgate(KEYS, ARGV)
  if not call then bind() end
  -- ARGV are numbers written by the client: `+ 0` parses them once, where
  -- tonumber() parses twice.
  if ARGV[1] ~= '' then
    now = ARGV[1] + 0
  else
    -- Redis 7 replicates effects, so reading TIME before writing is safe.
    local t = call('TIME')
    now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  local mode = ARGV[2]
  cost = ARGV[3] + 0
  local refund = mode == 'refund'
  local n = #KEYS
  if n == 1 then
    -- Sized at once: no rehash while the reply is put.
    out = {0, 0, 0, 0, 0, 0}
    local p1, p2 = ARGV[5] + 0, ARGV[6] + 0
    local w, t = ALG[ARGV[4]](0, KEYS[1], p1, p2, refund)
    if w and out[1] == 1 and mode ~= 'peek' then write(KEYS[1], w, t, p1, p2) end
    return out
  end
  out = {}
  local ws, ts, all = {}, {}, true
  for i = 1, n do
    local b = 3 * i
    ws[i], ts[i] = ALG[ARGV[b + 1]](6 * (i - 1), KEYS[i], ARGV[b + 2] + 0, ARGV[b + 3] + 0, refund)
    if out[6 * i - 5] == 0 then all = false end
  end
  if all and mode ~= 'peek' then
    for i = 1, n do
      if ws[i] then write(KEYS[i], ws[i], ts[i], ARGV[3 * i + 2] + 0, ARGV[3 * i + 3] + 0) end
    end
  end
  return out
end
-- Many decisions in one call: each request all or nothing by itself, and
-- apart from the others (one's denial or error never charges or denies
-- another). ARGV[1] = m; ARGV[2j], ARGV[2j + 1] = request j's number of
-- keys and of arguments; then each request's KEYS and ARGV, in turn. Reply:
-- request j's reply as floodgate() gives it, or an error for it alone.
local function many(KEYS, ARGV)
  local m = ARGV[1] + 0
  local replies = {}
  local k, a = 0, 1 + 2 * m
  for j = 1, m do
    local nk, na = ARGV[2 * j] + 0, ARGV[2 * j + 1] + 0
    local keys, args = {}, {}
    for i = 1, nk do keys[i] = KEYS[k + i] end
    for i = 1, na do args[i] = ARGV[a + i] end
    k, a = k + nk, a + na
    -- floodgate() writes only after deciding every key: an error leaves
    -- its request's keys as they were.
    local ok, r = pcall(floodgate, keys, args)
    if ok then
      replies[j] = r
    elseif type(r) == 'table' and r.err then
      replies[j] = r
    else
      replies[j] = {err = tostring(r)}
    end
  end
  return replies
end
