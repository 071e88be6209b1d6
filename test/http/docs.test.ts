// The examples in docs/http/*.md run as written: each `// name.mjs` block is run with node against the built package (dist), and probed with real requests.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { get, readIetf, statuses } from './support/http.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = existsSync(`${root}dist/esm/http/adapters/express.js`);

/** The runnable examples of a page: ```js blocks whose first line is `// <name>.mjs …`. */
function examples(page: string): Map<string, string> {
  const text = readFileSync(`${root}docs/http/${page}`, 'utf8');
  const out = new Map<string, string>();
  for (const match of text.matchAll(/```js\n(\/\/ (\S+\.mjs)[^\n]*\n[\s\S]*?)```/g)) out.set(match[2]!, match[1]!);
  return out;
}

/** Runs an example as an ES module inside the package (so `floodgate/…` resolves to dist) and waits for its URL. */
async function run(code: string, env: Record<string, string> = {}): Promise<{ url: string; output: () => string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    cwd: root,
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`example did not start:\n${output}`)), 10_000);
    const check = (): void => {
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!.replace('localhost', '127.0.0.1').replace(/\/$/, ''));
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`example exited with ${code}:\n${output}`));
    });
  });
  return { url, output: () => output, child };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const post = { method: 'POST' };

describe('docs/http examples run as written', { skip: built ? false : 'dist/ is not built; run `npm test` (it builds first)' }, () => {
  it('express.md: app.mjs', async () => {
    const code = examples('express.md').get('app.mjs');
    assert.ok(code);
    const { url, child } = await run(code);
    try {
      const home = await get(`${url}/`);
      assert.equal(home.status, 200);
      assert.equal(readIetf(home.headers).get('100-per-1m')!.r, 99);
      assert.deepEqual(await statuses(`${url}/login`, 6, post), [200, 200, 200, 200, 200, 429]);
      const refused = await get(`${url}/login`, post);
      assert.deepEqual([...readIetf(refused.headers).keys()], ['100-per-1m', 'burst', 'daily']);
      assert.ok(Number(refused.headers['retry-after']) > 0);
    } finally {
      await stop(child);
    }
  });

  it('node.md: app.mjs', async () => {
    const code = examples('node.md').get('app.mjs');
    assert.ok(code);
    const { url, child } = await run(code);
    try {
      assert.equal((await get(`${url}/`)).body, 'hello\n');
      assert.deepEqual(await statuses(`${url}/login`, 6, post), [200, 200, 200, 200, 200, 429]);
      const refused = await get(`${url}/login`, post);
      assert.equal(refused.headers['x-ratelimit-limit'], '5');
    } finally {
      await stop(child);
    }
  });

  it('fastify.md: app.mjs', async () => {
    const code = examples('fastify.md').get('app.mjs');
    assert.ok(code);
    const { url, child } = await run(code);
    try {
      assert.ok(readIetf((await get(`${url}/`)).headers).has('100-per-1m'));
      const health = await get(`${url}/health`);
      assert.equal(health.status, 200);
      assert.equal(health.headers['ratelimit'], undefined);
      assert.deepEqual(await statuses(`${url}/login`, 6, post), [200, 200, 200, 200, 200, 429]);
      assert.deepEqual([...readIetf((await get(`${url}/login`, post)).headers).keys()], ['burst', 'daily']);
    } finally {
      await stop(child);
    }
  });

  it('koa.md: app.mjs', async () => {
    const code = examples('koa.md').get('app.mjs');
    assert.ok(code);
    const { url, child } = await run(code);
    try {
      assert.equal((await get(`${url}/`)).body, 'hello\n');
      assert.equal((await get(`${url}/login`, post)).status, 401);
      const withKey = { method: 'POST', headers: { 'x-api-key': 'k1' } };
      assert.deepEqual(await statuses(`${url}/login`, 6, withKey), [200, 200, 200, 200, 200, 429]);
    } finally {
      await stop(child);
    }
  });

  describe('koa.md: grounded.mjs', () => {
    let redis: RedisServer;
    before(async () => {
      redis = await startRedis();
    });
    after(async () => {
      await redis?.stop();
    });

    it('runs against Redis and logs each decision', async () => {
      const code = examples('koa.md').get('grounded.mjs');
      assert.ok(code);
      const { url, child, output } = await run(code, { REDIS_URL: `${redis.url}/` });
      try {
        const reply = await get(`${url}/`);
        assert.equal(reply.body, 'Pong!');
        assert.equal(readIetf(reply.headers).get('1000-per-1h')!.r, 999);
        await new Promise((r) => setTimeout(r, 50));
        assert.match(output(), /floodgate 127\.0\.0\.1 GET \/ allowed 999\/1000 reset 3600s/);
      } finally {
        await stop(child);
      }
    });
  });
});
