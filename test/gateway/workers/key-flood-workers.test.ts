// A flood of new API keys against the gateway with --workers 2 (the cluster store in the primary): no live count of any rule is reset or shortened, and memory stays bounded.
import { describe, it } from 'node:test';
import { freePort } from '../../support/redis-server.js';
import { CONFIG, FLOOD_KEYS, flood } from '../support/flood.js';
import { serveCli, stopCli, writeTemp } from '../support/harness.js';

describe('gateway --workers 2: a flood of new API keys', { timeout: 600_000 }, () => {
  it(`regression: ${FLOOD_KEYS} distinct keys with --workers 2 (cluster store) reset no live count of any rule (exact), RSS bounded`, async () => {
    const port = await freePort();
    const cli = await serveCli(['--config', writeTemp('flood.yaml', CONFIG), '--workers', '2', '--listen', `127.0.0.1:${port}`]);
    try {
      await cli.waitForLog(() => cli.logs.filter((x) => x.msg === 'floodgate gateway listening' && x.worker !== undefined).length >= 2);
      await flood(Object.assign(cli, { url: `http://127.0.0.1:${port}` }), '--workers 2');
    } finally {
      await stopCli(cli);
    }
  });
});
