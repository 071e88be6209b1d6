/** `npm test` on a machine without redis-server: it stops before building, naming the one command that installs what is missing. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

test('npm test without redis-server on PATH: stops at once with the install command, runs no test', () => {
  // A PATH that holds node alone: no redis-server, no redis-cli, no apt-get (so nothing is installed).
  const bin = mkdtempSync(join(tmpdir(), 'floodgate-path-'));
  try {
    symlinkSync(process.execPath, join(bin, 'node'));
    const started = Date.now();
    const run = spawnSync(join(bin, 'node'), ['scripts/test.mjs'], {
      cwd: root,
      encoding: 'utf8',
      env: { PATH: bin, HOME: process.env.HOME ?? '/tmp', FLOODGATE_TEST_NO_INSTALL: '1' },
      timeout: 30_000,
    });
    assert.equal(run.status, 1, run.stderr);
    // chromium (the dashboard's browser test) is not on this PATH either.
    assert.match(run.stderr, /npm test: the tests run redis-server, redis-cli and chromium, and they are not installed\./);
    assert.match(run.stderr, /sudo apt-get install -y redis-server redis-tools chromium\n/);
    assert.doesNotMatch(run.stdout, /tests \d+/);
    assert.ok(Date.now() - started < 10_000, 'it stops before building or testing');
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
});
