-- Token bucket: up to `capacity` tokens, refilled at `rate` per second. A
-- bucket refilled continuously is exactly the virtual schedule with one
-- token every 1000 / rate ms (the client sends that interval, as the twin
-- computes it); keeping the time until it is full again instead of a token
-- count adds up no fractional refills. A missing bucket is full. The
-- schedule itself, as GCRA: its `queue` is nil.
ALG.tb = virtual_schedule
