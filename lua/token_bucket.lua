-- Token bucket: up to `capacity` tokens, refilled at `rate` per second,
-- computed lazily from the elapsed time. A missing bucket is full.
-- State: "tokens:timestamp_ms".
local cap, rate = tonumber(ARGV[4]), tonumber(ARGV[5])
local tokens, ts = cap, now
local v = redis.call('GET', KEYS[1])
if v then
  local s = fields(v)
  tokens, ts = s[1], s[2]
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(cap, tokens + elapsed / 1000 * rate)
if tokens < cost then
  local retry = nil
  if cost <= cap then
    -- Settle float rounding: at now + retry the refill must really cover the cost.
    retry = math.ceil((cost - tokens) / rate * 1000)
    while tokens + retry / 1000 * rate < cost do retry = retry + 1 end
  end
  return reply(false, cap, math.floor(tokens), (cap - tokens) / rate * 1000, retry, 0)
end
tokens = tokens - cost
local reset = (cap - tokens) / rate * 1000
if cost > 0 and not dry then
  if ts < now then ts = now end
  redis.call('SET', KEYS[1], num(tokens) .. ':' .. num(ts), 'PX', math.ceil(reset) + SLACK)
end
return reply(true, cap, math.floor(tokens), reset, nil, 0)
