-- Leaky bucket as a queue (nginx limit_req without nodelay): the queue
-- drains at `rate` per second; an admitted request waits until what is
-- ahead of it has drained (its delay); a request is rejected when the queue
-- has no room for its cost. State: the time until the queue is empty.
-- The client sends the interval, 1000 / rate ms, as for the token bucket.
ALG.lb = function(o, key, cap, interval, refund)
  return virtual_schedule(o, key, cap, interval, refund, true)
end
