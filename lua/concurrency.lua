-- Concurrency limit: at most `max` leases alive per key, across all app
-- servers. KEYS[1] is a sorted set of leases (their ids) scored by when they
-- expire, so a server that crashes mid-request leaks its slot only until the
-- lease runs out. Alive means expiring after now.
-- ARGV[1] = now in ms, or '' for the server's clock (TIME)
-- ARGV[2] = mode: 'check' (acquire the lease ARGV[3]), 'peek' (count,
--           write nothing), 'refund' (release the lease ARGV[3])
-- ARGV[3] = lease id (unique per request), ARGV[4] = max alive,
-- ARGV[5] = lease length in ms
-- Reply, as a decision's: {allowed (acquired; for a peek, would be; 1 for a
-- release), max, remaining (max - alive), ms until the last lease expires,
-- ms until the first expires when denied (-1 otherwise), 0}
local function lease(KEYS, ARGV)
  if not call then bind() end
  local t
  if ARGV[1] ~= '' then
    t = ARGV[1] + 0
  else
    local time = call('TIME')
    t = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
  end
  local key, mode, id = KEYS[1], ARGV[2], ARGV[3]
  local most, ttl = ARGV[4] + 0, ARGV[5] + 0
  -- Numbers leave as %d: Redis would print a number argument as %.17g.
  local now_s = format('%d', t)
  local alive = '(' .. now_s
  if mode ~= 'peek' then
    call('ZREMRANGEBYSCORE', key, '-inf', now_s)
    if mode == 'refund' then call('ZREM', key, id) end
  end
  local n = call('ZCOUNT', key, alive, '+inf')
  local allowed = 1
  if mode ~= 'refund' and n >= most then
    allowed = 0
  elseif mode == 'check' then
    call('ZADD', key, format('%d', t + ttl), id)
    -- The set lives as long as its newest lease, plus the usual slack.
    call('PEXPIRE', key, format('%d', ttl + SLACK))
    n = n + 1
  end
  local first = call('ZRANGEBYSCORE', key, alive, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local last = call('ZREVRANGEBYSCORE', key, '+inf', alive, 'WITHSCORES', 'LIMIT', 0, 1)
  local reset, retry = 0, nil
  if last[2] then reset = last[2] - t end
  if allowed == 0 and first[2] then retry = first[2] - t end
  out = {0, 0, 0, 0, 0, 0}
  put(0, allowed, most, most - n, reset, retry, 0)
  return out
end
