-- Fixed window: one counter per aligned window. State: window index, count.
local function fw_pack(width, idx, c)
  -- whole(idx), inlined: a Lua call costs more than the test.
  if idx % 1 == 0 and idx < 1e15 and idx > -1e15 then return format(pack_fmt(width, 1), idx, c) end
  return num(idx) .. format(pad(width), c)
end
ALG.fw = function(o, key, limit, window, refund)
  local width = WIDTH[limit] or width_of(limit)
  local idx = floor(now / window)
  local reset = (idx + 1) * window - now
  local count = 0
  local v = call('GET', key)
  -- Digits this code wrote: `+ 0` parses once, where tonumber() parses twice.
  if v and #v > width and sub(v, 1, -width - 1) + 0 == idx then
    count = sub(v, -width) + 0
  end
  if refund then
    local left = max(0, count - cost)
    put(o, 1, limit, limit - left, left > 0 and reset or 0, nil, 0)
    if left ~= count then return fw_pack(width, idx, left), reset + SLACK end
    return
  end
  -- A debit takes what fits: a window holds no more than its limit.
  local c = cost
  if debit and count + c > limit then c = max(0, limit - count) end
  if c > 0 and count + c > limit then
    local retry = nil
    if c <= limit then retry = reset end
    put(o, 0, limit, limit - count, count > 0 and reset or 0, retry, 0)
    return
  end
  count = count + c
  put(o, 1, limit, limit - count, count > 0 and reset or 0, nil, 0)
  if c > 0 then return fw_pack(width, idx, count), reset + SLACK end
end
-- Jittered: (limit, window, the key's offset).
ALG.fwj = jittered(ALG.fw)
EXTRA.fwj = 1
