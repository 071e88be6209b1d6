// The composite bench scenario: listed by the CLI with its variants, and each variant's server starts on a real Redis, answers, refuses the hot user, and (consumeAll) spends nothing on the parts a refusal passed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { startServer, type RunningServer } from '../../bench/lib/server.js';
import scenario from '../../bench/scenarios/composite.js';
import { redisKeys } from '../../src/stores/redis/index.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = fileURLToPath(new URL('../../dist', import.meta.url));

let redis: RedisServer;
let client: Redis;

before(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});

after(async () => {
  client?.disconnect();
  await redis?.stop();
});

/** Starts `name`'s server as the harness would (from dist/, which the test run builds first). */
function start(name: string): Promise<RunningServer> {
  const variant = scenario.variants.find((v) => v.name === name);
  assert.ok(variant, `no variant ${name}`);
  return startServer(variant, { cwd: ROOT, cpus: undefined, dist: DIST, redisUrl: redis.url });
}

/** `n` requests at once of `query` (default: the hot user u0 in org o0); the statuses, and how long they took in ms. */
async function burst(server: RunningServer, n: number, query = 'org=o0&user=u0'): Promise<{ statuses: number[]; ms: number }> {
  const started = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: n }, async () => {
      const response = await fetch(`http://127.0.0.1:${server.port}/?${query}`);
      await response.arrayBuffer();
      return response.status;
    }),
  );
  return { statuses, ms: performance.now() - started };
}

describe('bench scenario composite', () => {
  it('is listed with its five variants', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bench/run.ts'], { cwd: ROOT });
    const listed = stdout.slice(stdout.indexOf('\n  composite '));
    assert.match(listed, /^\n {2}composite /);
    for (const name of ['bare', 'floodgate-single', 'floodgate-composite', 'floodgate-parallel', 'rlf-union'])
      assert.match(listed, new RegExp(`\\n {6}${name} `), `${name} is listed`);
  });

  for (const name of ['bare', 'floodgate-single', 'floodgate-composite', 'floodgate-parallel', 'rlf-union']) {
    it(`${name}: starts, admits a user, and ${name === 'bare' ? 'never refuses' : 'refuses the hot user past 100 a second'}`, async () => {
      await client.flushall();
      const server = await start(name);
      try {
        assert.deepEqual((await burst(server, 1, 'org=o7&user=u3')).statuses, [200]);
        const { statuses, ms } = await burst(server, 300);
        const admitted = statuses.filter((s) => s === 200).length;
        assert.equal(admitted + statuses.filter((s) => s === 429).length, 300, `only 200 and 429: ${statuses.join(',')}`);
        if (name === 'bare') assert.equal(admitted, 300);
        else {
          // 100 a second: the bucket's 100 plus its refill while the burst ran (a fixed window: 100 per window it touched).
          const most = 100 + 100 * Math.ceil(ms / 1000);
          assert.ok(admitted >= 100 && admitted <= most, `${admitted} of 300 admitted in ${Math.round(ms)} ms`);
          if (ms < 1000) assert.ok(admitted < 300, `none refused in ${Math.round(ms)} ms`);
        }
        if (name === 'floodgate-composite') {
          // All or nothing: the refused requests spent nothing on the per-day window or the org's minute.
          const [day, org] = await Promise.all([
            client.hget(redisKeys('fg:fixed-window:1000000:86400000:0:{o0}:u0').state, 'c'),
            client.hget(redisKeys('fg:fixed-window:100000:60000:0:{o0}').state, 'c'),
          ]);
          assert.deepEqual([Number(day), Number(org)], [admitted, admitted]);
        }
      } finally {
        await server.stop();
      }
    });
  }

  it('a request without org or user is a 400, not a limiter call', async () => {
    const server = await start('floodgate-composite');
    try {
      const response = await fetch(`http://127.0.0.1:${server.port}/?user=u1`);
      assert.equal(response.status, 400);
    } finally {
      await server.stop();
    }
  });
});
