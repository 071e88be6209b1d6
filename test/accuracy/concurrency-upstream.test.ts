// Accuracy of the middleware's concurrency limit across processes, counted where it matters: 8 forked apps on one real Redis pass admitted requests to one real upstream, which counts the requests it is serving at once; that count never exceeds the limit.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../support/redis-server.js';

const APP = fileURLToPath(new URL('../support/limited-app.ts', import.meta.url));
const PROCESSES = 8;
const LIMIT = 5;
const CLIENTS = 48;
const RUN_MS = 3000;

let redis: RedisServer;
let upstream: Server;
let serving = 0;
let mostServing = 0;
let served = 0;
const apps: ChildProcess[] = [];
const ports: number[] = [];

before(async () => {
  redis = await startRedis();
  // Holds each request 2 to 12 ms, counting how many it serves at once; the count drops before the answer is sent.
  upstream = createServer((_req, res) => {
    serving++;
    mostServing = Math.max(mostServing, serving);
    setTimeout(
      () => {
        serving--;
        served++;
        res.end('ok');
      },
      2 + Math.floor(Math.random() * 10),
    );
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  for (let i = 0; i < PROCESSES; i++) {
    const app = fork(APP, [redis.url, String(upstreamPort), String(LIMIT)], { execArgv: ['--import', 'tsx'] });
    apps.push(app);
  }
  ports.push(
    ...(await Promise.all(
      apps.map(
        (app) =>
          new Promise<number>((resolve, reject) => {
            app.once('message', (m: { port: number }) => resolve(m.port));
            app.once('exit', (code) => reject(new Error(`an app exited (code ${code}) before listening`)));
          }),
      ),
    )),
  );
});

after(async () => {
  for (const app of apps) app.kill('SIGKILL');
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  await redis?.stop();
});

/** One GET on `agent`; resolves to its status (0 for a socket error). */
function get(port: number, agent: Agent): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

test(`${PROCESSES} processes, one in-flight limit of ${LIMIT} on Redis: the upstream never serves more than ${LIMIT} at once`, async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
  const counts = new Map<number, number>();
  const deadline = Date.now() + RUN_MS;
  // On a loaded machine the clients may not fill every slot within RUN_MS: go on (up to three times as long) until they have,
  // so the bound is tested under contention rather than assumed.
  const lastChance = deadline + 2 * RUN_MS;
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      let n = i;
      while (Date.now() < deadline || (mostServing < LIMIT && Date.now() < lastChance)) {
        const status = await get(ports[n++ % PROCESSES]!, agent);
        counts.set(status, (counts.get(status) ?? 0) + 1);
      }
    }),
  );
  agent.destroy();
  const admitted = counts.get(200) ?? 0;
  const refused = counts.get(429) ?? 0;
  console.log(
    `in flight at the upstream: at most ${mostServing} (limit ${LIMIT}); ${admitted} admitted, ${refused} refused, ${served} served; statuses ${JSON.stringify(Object.fromEntries(counts))}`,
  );
  assert.ok(mostServing <= LIMIT, `the upstream served ${mostServing} at once, limit ${LIMIT}`);
  // Contended: the limit was reached and requests were refused, so the bound was tested.
  assert.equal(mostServing, LIMIT);
  assert.ok(refused > 0);
  assert.equal(admitted, served);
  assert.deepEqual(
    [...counts.keys()].filter((s) => s !== 200 && s !== 429),
    [],
  );
  // Every slot is released once the responses have ended.
  const reader = new Redis(redis.url);
  try {
    let held = -1;
    for (let i = 0; i < 100 && held !== 0; i++) {
      held = 0;
      for (const name of await reader.keys('*')) if ((await reader.type(name)) === 'zset') held += await reader.zcard(name);
      if (held !== 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(held, 0, 'slots still held after every response ended');
  } finally {
    reader.disconnect();
  }
});
