// The README's main job (npm start): a small demo API, and the floodgate gateway in front of it on the embedded memory store, with curl commands to try.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

const port = Number(process.env.PORT ?? 8080);
const upstreamPort = Number(process.env.UPSTREAM_PORT ?? 3000);

// The demo upstream: answers every request with what it received, so the forwarded headers are visible.
const upstream = createServer((req, res) => {
  res.setHeader('Content-Type', 'application/json');
  res.end(
    `${JSON.stringify({ hello: 'from the upstream', method: req.method, path: req.url, forwardedFor: req.headers['x-forwarded-for'] })}\n`,
  );
});
await new Promise((resolve) => upstream.listen(upstreamPort, '127.0.0.1', resolve));

// 3 requests per 5 s per API key (X-API-Key), or per client address for requests without one.
const bin = fileURLToPath(new URL('../bin/floodgate.mjs', import.meta.url));
const gateway = spawn(
  process.execPath,
  [
    bin,
    'serve',
    '--upstream',
    `http://127.0.0.1:${upstreamPort}`,
    '--listen',
    `127.0.0.1:${port}`,
    '--limit',
    '3/5s',
    '--key',
    'header:x-api-key,ip',
    '--log-level',
    'warn',
  ],
  { stdio: ['ignore', 'inherit', 'inherit'] },
);

// The gateway logs nothing at warn level when it starts; poll its health endpoint instead.
for (let i = 0; ; i += 1) {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/_floodgate/healthz`);
    if (r.ok) break;
  } catch {
    if (i > 100 || gateway.exitCode !== null) {
      console.error('the gateway did not start; see the messages above');
      upstream.close();
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const base = `http://127.0.0.1:${port}`;
console.log(`
floodgate gateway on ${base} → demo upstream on http://127.0.0.1:${upstreamPort}
policy: 3 requests per 5 s per API key (X-API-Key), else per client address; memory store

With an API key (the 4th request within 5 s gets 429 with RateLimit and Retry-After):
  for i in 1 2 3 4; do curl -s -i -H 'X-API-Key: alice' ${base}/hello | grep -E '^(HTTP|RateLimit|Retry-After)'; done

Another key has its own quota:
  curl -s -H 'X-API-Key: bob' ${base}/hello

Without a key (counted per address):
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code}\\n' ${base}/hello; done

Metrics, health, and the nginx auth_request decision endpoint:
  curl -s ${base}/_floodgate/metrics | grep floodgate_decisions_total
  curl -s -i -H 'X-Original-URI: /hello' -H 'X-API-Key: carol' ${base}/_floodgate/decide

Ctrl-C stops both.
`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  gateway.kill('SIGTERM');
  upstream.close();
  upstream.closeAllConnections();
};
gateway.on('exit', (code) => {
  upstream.close();
  upstream.closeAllConnections();
  process.exitCode = stopping ? 0 : (code ?? 1);
});
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
