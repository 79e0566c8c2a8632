-- The virtual schedule shared by GCRA, the token bucket and the leaky
-- bucket. One unit of cost takes `interval` ms; `burst` units fit at once
-- from rest (tau = burst * interval). State: the backlog (ms of work not yet
-- drained: the time until the bucket is full, or the queue empty, again)
-- and when it was written, as 'backlog:ts'. Keeping the backlog rather than
-- an absolute time keeps the numbers small, so fractions of a ms stay exact
-- at any clock.
-- `queue` reports the leaky bucket's delay: the time until what is ahead of
-- an admitted request has drained.
-- EPS: a ns of float rounding never costs a request; for units shorter
-- than 1 ms, a millionth of a unit, so that it never buys one either.
local EPS = 1e-6
-- 'backlog:ts', in one format call when both are whole.
local function vs_state(b, ts)
  -- whole(b) and whole(ts), inlined: a Lua call costs more than the test.
  if b % 1 == 0 and b < 1e15 and ts % 1 == 0 and ts < 1e15 and ts > -1e15 then
    return format('%d:%d', b, ts)
  end
  return num(b) .. ':' .. num(ts)
end
local function virtual_schedule(o, key, burst, interval, refund, queue)
  local tau = burst * interval
  local eps = EPS
  if interval < 1 then eps = EPS * interval end
  local backlog, ts = 0, now
  local v = call('GET', key)
  if v then
    local b, t = match(v, '^([^:]*):(.*)$')
    backlog, ts = b + 0, t + 0
  end
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  -- max(0, backlog - elapsed) without the call (NaN, from foreign
  -- digits, becomes 0 as max() makes it).
  backlog = backlog - elapsed
  if not (backlog > 0) then backlog = 0 end
  if ts < now then ts = now end
  -- A block: the schedule pushed so that a request of cost 1 fits only
  -- `blocked` ms from now (never pulled back: a longer wait stays).
  if blocked then
    local b = max(backlog, tau - interval + blocked)
    put(o, 1, burst, floor((tau - b + eps) / interval), b, nil, 0)
    if b ~= backlog then return vs_state(b, ts), ceil(b) + SLACK end
    return
  end
  if refund then
    local b = max(0, backlog - cost * interval)
    put(o, 1, burst, floor((tau - b + eps) / interval), b, nil, 0)
    if b ~= backlog then return vs_state(b, ts), ceil(b) + SLACK end
    return
  end
  -- A reservation of several limits is booked at the longest of their
  -- waits (`lead`): each schedule takes the cost from then on.
  if lead > backlog then backlog = lead end
  local after = backlog + cost * interval
  -- A reservation may book up to `wait` ms ahead (the leaky bucket's
  -- queue holds no more than its capacity whatever the wait).
  local room = 0
  if wait and not queue then room = wait end
  -- A debit is charged whatever it leaves: beyond the burst, a debt.
  if cost > 0 and after - tau > eps + room and not debit then
    local retry = nil
    if cost <= burst then retry = after - tau - room end
    put(o, 0, burst, floor((tau - backlog + eps) / interval), backlog, retry, 0)
    return
  end
  local delay = 0
  if queue then
    delay = backlog
    -- A reservation of the leaky bucket: its delay at most `wait`.
    if wait and cost > 0 and backlog - wait > eps then
      put(o, 0, burst, floor((tau - backlog + eps) / interval), backlog, backlog - wait, 0)
      return
    end
  elseif wait and after - tau > eps then
    delay = after - tau
  end
  -- Never said longer than asked: within `eps` of it is it.
  if wait and delay > wait then delay = wait end
  put(o, 1, burst, floor((tau - after + eps) / interval), after, nil, delay)
  if cost > 0 then return vs_state(after, ts), ceil(after) + SLACK end
end

-- GCRA (generic cell rate algorithm), as go-redis/redis_rate and governor:
-- one emission every `interval` ms, `burst` at once from rest.
-- The schedule itself, called as every algorithm is: its `queue` is nil,
-- so no delay (a wrapper would cost a Lua call a decision).
ALG.gcra = virtual_schedule
