// A minimal node:http + undici proxy listening on LISTENERS sockets of one port (SO_REUSEPORT when more than one),
// plain JavaScript so any node binary runs it: bench/accept-storm.ts starts it under Node 20 and Node 22.
import { createServer } from 'node:http';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';

const pool = new Pool(process.env.FLOODGATE_BENCH_UPSTREAM_URL, { connections: 64 });
const listeners = Number(process.env.LISTENERS ?? '1');
const port = Number(process.env.FLOODGATE_BENCH_PORT);
const handler = (req, res) => {
  pool.request({ path: req.url, method: req.method, headers: { 'x-api-key': req.headers['x-api-key'] ?? '' }, body: null }).then(
    (answer) => {
      res.writeHead(answer.statusCode, { 'content-type': answer.headers['content-type'] ?? 'application/json' });
      pipeline(answer.body, res, () => {});
    },
    () => res.writeHead(502).end(),
  );
};
let listening = 0;
for (let i = 0; i < listeners; i += 1) {
  // Each socket of the group is accepted from on its own; the kernel spreads new connections over them.
  createServer(handler).listen({ port, host: '127.0.0.1', reusePort: listeners > 1 }, () => {
    listening += 1;
    if (listening === listeners) console.log('ready');
  });
}
process.on('SIGTERM', () => process.exit(0));
