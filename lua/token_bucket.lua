-- Token bucket: up to `capacity` tokens, refilled at `rate` per second. A
-- bucket refilled continuously is exactly the virtual schedule with one
-- token every 1000 / rate ms; keeping the time until it is full again
-- instead of a token count adds up no fractional refills. A missing bucket
-- is full.
ALG.tb = function(o, key, cap, rate, refund)
  return virtual_schedule(o, key, cap, 1000 / rate, refund, false)
end
