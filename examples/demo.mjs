// The README's main job: a node:http API limited by floodgate on the embedded memory store (run: npm start).
import { createServer } from 'node:http';
import { RateLimiter } from '../dist/esm/index.js';

const port = Number(process.env.PORT ?? 3000);
// 5 requests per 10 seconds per API key (or per IP when no key is sent).
const limiter = new RateLimiter({ limit: 5, window: '10s', inMemoryBlock: true });

const server = createServer(async (req, res) => {
  const key = req.headers['x-api-key'] || req.socket.remoteAddress || 'unknown';
  const d = await limiter.consume(String(key));
  res.setHeader('RateLimit-Policy', `"default";q=${d.limit};w=10`);
  res.setHeader('RateLimit', `"default";r=${d.remaining};t=${Math.ceil(d.resetMs / 1000)}`);
  if (!d.allowed) {
    res.writeHead(429, { 'Retry-After': String(Math.ceil(d.retryAfterMs / 1000)), 'Content-Type': 'text/plain' });
    res.end('Too Many Requests\n');
    return;
  }
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ hello: 'world', remaining: d.remaining }) + '\n');
});

server.listen(port, () => {
  console.log(`floodgate demo listening on http://127.0.0.1:${port} (5 requests / 10 s per key)`);
  console.log(`try: for i in $(seq 7); do curl -s -i -H 'X-API-Key: alice' http://127.0.0.1:${port}/ | head -1; done`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
