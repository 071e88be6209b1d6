// Per-policy keys on a real Redis Cluster behind node:http: keys sharing a hash tag are decided in one script call; keys in
// different slots are refused before any call with CROSS_SLOT, through the error path, and nothing is counted.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { rateLimit } from '../../src/http/adapters/node.js';
import type { ClientInfo } from '../../src/http/types.js';
import { RedisStore } from '../../src/stores/redis/index.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-server.js';
import { get, readIetf } from './support/http.js';

let cluster: RedisCluster;
let client: Cluster;
let store: RedisStore;
before(async () => {
  cluster = await startRedisCluster();
  client = new Cluster(cluster.nodes);
  store = new RedisStore({ client });
});
after(async () => {
  await store?.close();
  client?.disconnect();
  await cluster?.stop();
});

/** A node:http server limited by `limit` (which answers a failed decision 500 itself, after onError). */
async function serve(limit: ReturnType<typeof rateLimit>): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    limit(req, res).then(
      (ok) => {
        if (ok) res.end('ok');
      },
      (error: { code?: string }) => {
        res.statusCode = 500;
        res.end(String(error.code));
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const header = (client: ClientInfo, name: string): string => String(client.headers[name]);

describe('per-policy keys on Redis Cluster', () => {
  it('per user and per org under one hash tag: one atomic decision; the org refusing spends nothing of the user', async () => {
    const user = new RateLimiter({ limit: 3, window: '1m', prefix: 'c-user', store });
    const org = new RateLimiter({ limit: 2, window: '1m', prefix: 'c-org', store });
    const { url, server } = await serve(
      rateLimit({
        key: (_req, c) => `{${header(c, 'x-org')}}:${header(c, 'x-user')}`,
        limiter: [
          { limiter: user, name: 'user' },
          { limiter: org, name: 'org', key: (_req, c) => `{${header(c, 'x-org')}}` },
        ],
      }),
    );
    try {
      const as = (u: string) => ({ headers: { 'x-user': u, 'x-org': 'acme' } });
      assert.equal((await get(`${url}/x`, as('ana'))).status, 200);
      assert.equal((await get(`${url}/x`, as('bo'))).status, 200);
      const refused = await get(`${url}/x`, as('ana'));
      assert.equal(refused.status, 429);
      assert.deepEqual((JSON.parse(refused.body) as Record<string, unknown>)['violated-policies'], ['org']);
      assert.deepEqual([...readIetf(refused.headers).keys()], ['user', 'org']);
      assert.equal((await user.peek('{acme}:ana')).remaining, 2);
    } finally {
      server.close();
    }
  });

  it('a global key beside per-user keys: CROSS_SLOT to the error path, nothing counted', async () => {
    const user = new RateLimiter({ limit: 3, window: '1m', prefix: 'x-user', store });
    const all = new RateLimiter({ limit: 100, window: '1m', prefix: 'x-all', store });
    const errors: Array<{ code?: string }> = [];
    const { url, server } = await serve(
      rateLimit({
        onError: (error) => void errors.push(error as { code?: string }),
        key: (_req, c) => header(c, 'x-user'),
        limiter: [{ limiter: user }, { limiter: all, key: () => 'all' }],
      }),
    );
    try {
      const reply = await get(`${url}/x`, { headers: { 'x-user': 'ana' } });
      assert.equal(reply.status, 500);
      assert.deepEqual(
        errors.map((e) => e.code),
        ['FLOODGATE_CROSS_SLOT'],
      );
      assert.equal((await user.peek('ana')).remaining, 3);
      assert.equal((await all.peek('all')).remaining, 100);
    } finally {
      server.close();
    }
  });
});
