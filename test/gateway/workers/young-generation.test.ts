// --workers starts each worker with a young generation sized for requests in flight (--max-semi-space-size=64), unless
// the operator set one in NODE_OPTIONS or the primary's flags: read back from the real workers' command lines.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { withWorkerSemiSpace, WORKER_SEMI_SPACE_MB } from '../../../src/gateway/workers/young-generation.js';
import { serveCli, startUpstream, stopCli, type Upstream } from '../support/harness.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

/** The node arguments of the processes that logged "listening" (the workers), read from /proc. */
async function workerArgs(env: NodeJS.ProcessEnv): Promise<string[][]> {
  const cli = await serveCli(['--upstream', upstream.url, '--limit', '100/1m', '--workers', '2'], env);
  try {
    const listening = () => cli.logs.filter((l) => l.msg === 'floodgate gateway listening');
    await cli.waitForLog(() => listening().length >= 2, 60_000);
    return listening().map((l) => readFileSync(`/proc/${String(l.pid)}/cmdline`, 'utf8').split('\0'));
  } finally {
    await stopCli(cli);
  }
}

describe('worker young generation', () => {
  it('adds the flag when neither the flags nor NODE_OPTIONS set one', () => {
    assert.deepEqual(withWorkerSemiSpace(['--import', 'tsx'], undefined), [
      '--import',
      'tsx',
      `--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`,
    ]);
    assert.deepEqual(withWorkerSemiSpace([], '--enable-source-maps'), [`--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`]);
  });

  it("keeps the operator's choice, in either spelling, from the flags or NODE_OPTIONS", () => {
    for (const own of ['--max-semi-space-size=16', '--max_semi_space_size=8']) {
      assert.deepEqual(withWorkerSemiSpace([own], undefined), [own]);
      assert.deepEqual(withWorkerSemiSpace([], `--enable-source-maps ${own}`), []);
    }
    assert.deepEqual(withWorkerSemiSpace(['--max-semi-space-size', '16'], undefined), ['--max-semi-space-size', '16']);
  });

  it('real --workers 2: every worker runs with the flag; with NODE_OPTIONS choosing one, without it', async () => {
    for (const args of await workerArgs({})) assert.ok(args.includes(`--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`), args.join(' '));
    for (const args of await workerArgs({ NODE_OPTIONS: '--max-semi-space-size=8' }))
      assert.ok(!args.some((a) => a.startsWith('--max-semi-space-size')), args.join(' '));
  });
});
