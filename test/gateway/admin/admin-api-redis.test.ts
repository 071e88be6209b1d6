// The admin API with gateways on one Redis: a block set through one host refuses the key on another, and an unblock or reset through one admits it on the other at once, although that host had learned the block in memory, even when its subscriber missed the announcement.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { get } from '../../http/support/http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { adminBlock, adminJson } from '../support/admin.js';
import { sleep, untilReady } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'test-admin-token-0123456789abcdef';
const fixture = redisGatewayFixture();

async function gateway(): Promise<Gateway> {
  const g = await fixture.start(
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}store: { type: redis, url: "${fixture.redis.url}", timeout: 200ms }\n` +
      'rules:\n  - { name: api, key: "header:x-api-key", policies: [{ limit: 5, window: 1h, blockDuration: 1h }] }\n',
  );
  await untilReady(`${g.adminUrl}/readyz`);
  return g;
}

/** A POST to the admin API on `g` with the token. */
const admin = (g: Gateway, path: string, body?: string) => adminJson(g.adminUrl!, TOKEN, 'POST', path, body);

/** Polls until `check` holds, up to a second: the announcement travels through Redis pub/sub. */
async function soon(check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > 1000) throw new Error('not within a second');
    await sleep(5);
  }
  return Date.now() - started;
}

describe('admin API on Redis, two hosts', () => {
  it('a block through host A refuses on host B; an unblock through A admits on B at once, with the count kept; a reset too', async () => {
    const [a, b] = [await gateway(), await gateway()];
    const onB = async (key: string) => (await get(`${b.url}/x`, { headers: { 'x-api-key': key } })).status;
    assert.equal(await onB('cust'), 200);
    assert.equal((await admin(a, '/admin/rules/api/keys/cust/block', '{"duration":"forever"}')).status, 200);
    assert.equal(await onB('cust'), 429, 'B refuses: the block is in Redis');
    assert.equal(await onB('cust'), 429, 'and now from its in-memory block too');
    const unblocked = await admin(a, '/admin/rules/api/keys/cust/unblock');
    assert.equal(unblocked.json.policies[0].remaining, 4, 'the count is kept');
    await soon(async () => (await onB('cust')) === 200);
    // Over the limit: blockDuration blocks it for an hour, on B in memory as well.
    for (let i = 0; i < 4; i++) await onB('cust');
    assert.equal(await onB('cust'), 429);
    assert.equal(await onB('cust'), 429);
    assert.equal((await admin(a, '/admin/rules/api/keys/cust/reset')).status, 200);
    await soon(async () => (await onB('cust')) === 200);
  });
});

describe('admin API on Redis: an announcement a host missed', () => {
  it('an unblock published while host B’s subscriber was reconnecting still lets B admit the key (it was refused until a restart with a block "forever")', async () => {
    const [a, b] = [await gateway(), await gateway()];
    const onB = async (key: string) => (await get(`${b.url}/x`, { headers: { 'x-api-key': key } })).status;
    assert.equal(await onB('lost'), 200);
    assert.equal((await admin(a, '/admin/rules/api/keys/lost/block', '{"duration":"forever"}')).status, 200);
    assert.equal(await onB('lost'), 429);
    assert.equal(await onB('lost'), 429, 'B holds the block in memory');
    // Every subscriber connection is dropped; ioredis reconnects after about 50 ms, and the unblock is announced well
    // within that, so B's subscriber is not there to hear it.
    const io = new Redis(fixture.redis.url);
    try {
      await io.client('KILL', 'TYPE', 'pubsub');
    } finally {
      io.disconnect();
    }
    assert.equal((await admin(a, '/admin/rules/api/keys/lost/unblock')).status, 200);
    // B reads the change counter when its subscriber is back, finds it ahead of what it heard, and drops its blocks.
    await soon(async () => (await onB('lost')) === 200);
  });
});
