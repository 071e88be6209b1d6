// A script whose only work is awaiting a waiting or paced consume runs to its end: the wait's timer keeps the process alive (an unref'd one would let it exit mid-wait, code 13).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = existsSync(`${root}dist/esm/index.js`);

test(
  'a script awaiting a waiting and a paced consume on the memory store finishes instead of exiting mid-wait',
  { skip: !built && 'run node scripts/build.mjs first' },
  () => {
    const code = `
    import { RateLimiter } from './dist/esm/index.js';
    const waiting = new RateLimiter({ limit: 1, window: '200ms', wait: { timeout: '1s' } });
    await waiting.consume('k');
    const second = await waiting.consume('k');
    const paced = new RateLimiter({ limit: 2, window: '400ms', execEvenly: true });
    await paced.consume('k');
    const third = await paced.consume('k');
    console.log(JSON.stringify({ second: second.allowed, waited: second.waitedMs > 0, third: third.waitedMs > 0 }));
  `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: root, encoding: 'utf8', timeout: 10_000 });
    assert.equal(run.status, 0, `exit ${run.status}: ${run.stderr}`);
    assert.deepEqual(JSON.parse(run.stdout), { second: true, waited: true, third: true });
  },
);
