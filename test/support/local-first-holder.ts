// Child process of the local-first fault tests: takes a large lease on one key, reports what it holds, then waits to be killed.
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/index.js';
import { LocalFirstStore } from '../../src/stores/redis/index.js';

const [url, channel, prefix, key, limit, windowMs] = process.argv.slice(2) as [string, string, string, string, string, string];
const client = new Redis(url);
const store = new LocalFirstStore({ client, channel });
const limiter = new RateLimiter({ store, limit: Number(limit), window: Number(windowMs), prefix });
while (!store.stats().live) await new Promise((r) => setTimeout(r, 10));
// A burst grows the slices; stop with units in hand.
let admitted = 0;
for (let round = 0; round < 20; round++) {
  const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.consume(key)));
  admitted += decisions.filter((d) => d.allowed).length;
}
// A top-up the last consumes asked for is still queued or in flight: Redis counts its grant, so wait
// for the reply before counting what is held (well before 2 × leaseMs, when an idle lease goes back).
await new Promise((r) => setTimeout(r, 50));
const { unitsLeased, unitsReturned } = store.stats();
process.send!({ admitted, held: unitsLeased - unitsReturned - admitted });
// Hold the lease until SIGKILL.
setInterval(() => {}, 1000);
