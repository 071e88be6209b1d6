// Regression: a SIGHUP sent right after the listening line, before the config reloader was set up, ended the gateway (Node's default for an unhandled SIGHUP).
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { runCli, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

it('a SIGHUP as soon as the gateway says it listens reloads the config instead of ending the process', async () => {
  const config = writeTemp('sighup-start.yaml', `upstream: ${upstream.url}\nrules: [{ name: all, policies: ["100/1m"] }]\n`);
  const cli = runCli(['serve', '--listen', '127.0.0.1:0', '--config', config, '--no-watch']);
  // Sent from the stdout line handler itself: the earliest moment a supervisor could send it.
  const line = await cli.waitForLog((l) => {
    if (l.msg !== 'floodgate gateway listening') return false;
    cli.child.kill('SIGHUP');
    return true;
  });
  await cli.waitForLog((l) => typeof l.msg === 'string' && /reload/i.test(l.msg));
  assert.equal(cli.child.exitCode, null, 'still running');
  assert.equal((await get(`${String(line.url)}/x`)).status, 200);
  assert.equal(await stopCli(cli), 0);
});
