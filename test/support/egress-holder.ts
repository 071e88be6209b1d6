// Child process of the outbound kill test: starts one call that reserves tokens and takes a slot, says so, and hangs until it is killed.
import { Redis } from 'ioredis';
import { RedisStore } from '../../src/stores/redis/index.js';
import { OutboundLimiter } from '../../src/egress/index.js';

const [redisUrl, prefix] = process.argv.slice(2);
if (prefix === undefined) throw new Error('usage: egress-holder.ts <redis url> <prefix>');
const client = new Redis(redisUrl!);
const limiter = new OutboundLimiter({
  store: new RedisStore({ client }),
  prefix: prefix!,
  tokens: { limit: 100, window: '2s' },
  concurrency: { limit: 1, ttl: '3s' },
});
void limiter.schedule(
  'api',
  () =>
    new Promise<never>(() => {
      process.send!({ type: 'holding' });
    }),
  { cost: 80 },
);
