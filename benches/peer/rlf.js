// The peer of benches/peer_load.rs: rate-limiter-flexible's RateLimiterRedis
// (a fixed window) on ioredis with auto-pipelining, `callers` concurrent
// callers each consuming one point of a key in a loop for `secs` seconds,
// over `keys` keys in the same order floodgate's tasks use. Prints one JSON
// line: {"decisions": n, "secs": s, "errors": e}.
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const [url, secs, callers, keys] = process.argv.slice(2);
const redis = new Redis(url, { enableAutoPipelining: true });
const limiter = new RateLimiterRedis({
  storeClient: redis,
  keyPrefix: 'rlf',
  points: 1e9,
  duration: 60,
});

let stop = false;
let decisions = 0;
let errors = 0;

async function caller(t) {
  let i = 0;
  while (!stop) {
    const key = 'client-' + ((t * 7919 + i * 104729) % Number(keys));
    try {
      await limiter.consume(key, 1);
    } catch (e) {
      if (e instanceof Error) errors++;
    }
    decisions++;
    i++;
  }
}

redis.once('ready', async () => {
  await limiter.consume('warm-up', 1);
  const started = process.hrtime.bigint();
  const running = [];
  for (let t = 0; t < Number(callers); t++) running.push(caller(t));
  setTimeout(() => { stop = true; }, Number(secs) * 1000);
  await Promise.all(running);
  const s = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(JSON.stringify({ decisions, secs: s, errors }));
  redis.disconnect();
});
