// The README's main job (npm start): a small demo API, and the floodgate gateway in front of it on the embedded memory store, with curl commands to try.
// PORT (default 8080) moves the gateway, UPSTREAM_PORT (default 3000) the demo upstream.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { setInterval } from 'node:timers';
import { fileURLToPath } from 'node:url';

/** A port from the environment variable `name`, or `fallback`; anything else ends the run with what to write. */
function portFrom(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    console.error(`npm start: ${name}=${raw} is not a port; write a number from 1 to 65535, e.g. ${name}=${fallback + 1} npm start`);
    process.exit(2);
  }
  return port;
}

const port = portFrom('PORT', 8080);
const upstreamPort = portFrom('UPSTREAM_PORT', 3000);

/** Ends the run saying which port is taken and how to pick another, instead of a listen error's stack. */
function portTaken(what, variable, taken, error) {
  const other = variable === 'PORT' ? upstreamPort : port;
  let suggestion = taken + 1;
  while (suggestion === other) suggestion += 1;
  const reason = error.code === 'EADDRINUSE' ? 'is already in use' : `cannot be used (${error.code ?? error.message})`;
  console.error(
    `npm start: port ${taken} (${what}) ${reason} on 127.0.0.1.\n` +
      `Pick another with ${variable}, e.g.: ${variable}=${suggestion} npm start   (PORT moves the gateway, UPSTREAM_PORT the demo upstream)`,
  );
  process.exit(1);
}

/** Listens on 127.0.0.1:`at`, rejecting with the listen error (EADDRINUSE when taken). */
const listenOn = (server, at) =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(at, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

// The demo upstream: answers every request with what it received, so the forwarded headers are visible.
const upstream = createServer((req, res) => {
  res.setHeader('Content-Type', 'application/json');
  res.end(
    `${JSON.stringify({ hello: 'from the upstream', method: req.method, path: req.url, forwardedFor: req.headers['x-forwarded-for'] })}\n`,
  );
});
await listenOn(upstream, upstreamPort).catch((error) => portTaken('the demo upstream', 'UPSTREAM_PORT', upstreamPort, error));

// The gateway's port, tried here first: the gateway would say the same, but only after loading its packages.
const probe = createServer();
await listenOn(probe, port).catch((error) => {
  upstream.close();
  portTaken('the gateway', 'PORT', port, error);
});
await new Promise((resolve) => probe.close(resolve));

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
    'info',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);

// The banner waits for this gateway's own "listening" line: a health check could be answered by whatever else
// holds the port. Its info lines are read for that and not shown; warnings and errors are passed through.
const listening = new Promise((resolve) => {
  const lines = createInterface({ input: gateway.stdout });
  lines.on('line', (line) => {
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      process.stdout.write(`${line}\n`);
      return;
    }
    if (entry.msg === 'floodgate gateway listening' && entry.pid === gateway.pid) resolve(true);
    else if (typeof entry.level === 'number' && entry.level >= 40) process.stdout.write(`${line}\n`);
  });
  gateway.once('exit', () => resolve(false));
});

if (!(await listening)) {
  console.error(`npm start: the gateway did not start on 127.0.0.1:${port}; see its message above.`);
  upstream.close();
  process.exit(1);
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
// npm start is npm → sh → this script: a SIGTERM to npm ends the shell only, so the launcher going away stops both too.
const launcher = process.ppid;
setInterval(() => {
  if (process.ppid !== launcher) stop();
}, 500).unref();
