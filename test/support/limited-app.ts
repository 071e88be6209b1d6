// Child process of the in-flight accuracy test: a node:http app behind floodgate's middleware with a concurrency limit on a shared Redis, passing each admitted request on to a real upstream; reports its port, then serves until killed.
import { createServer, request } from 'node:http';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter, RateLimiter } from '../../src/index.js';
import { rateLimit } from '../../src/http/adapters/node.js';
import { RedisStore } from '../../src/stores/redis/index.js';

const [redisUrl, upstreamPort, limit] = process.argv.slice(2);
const client = new Redis(redisUrl!);
const store = new RedisStore({ client });
const limited = rateLimit({
  key: () => 'tenant',
  limiter: new RateLimiter({ store, limit: 1_000_000, window: '1m', prefix: 'inflight-rate' }),
  concurrency: new ConcurrencyLimiter({ store, limit: Number(limit), ttl: '5s', prefix: 'inflight' }),
  // Every refusal is expected here; only failures are worth a line.
  onError: (error) => console.error('limited-app:', error),
});

const server = createServer(async (req, res) => {
  if (!(await limited(req, res))) return;
  const upstream = request({ host: '127.0.0.1', port: Number(upstreamPort), path: req.url, agent: false }, (answer) => {
    res.writeHead(answer.statusCode ?? 502);
    answer.pipe(res);
  });
  upstream.on('error', () => res.writeHead(502).end());
  upstream.end();
});
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
});
