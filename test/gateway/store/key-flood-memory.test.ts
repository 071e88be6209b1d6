// A flood of new API keys against the gateway on the embedded memory store: no live count of any rule is reset or shortened, and memory stays bounded by store.maxKeys.
import { describe, it } from 'node:test';
import { CONFIG, FLOOD_KEYS, flood } from '../support/flood.js';
import { serveCli, stopCli, writeTemp } from '../support/harness.js';

describe('gateway: a flood of new API keys', { timeout: 600_000 }, () => {
  it(`regression: ${FLOOD_KEYS} distinct keys on the memory store reset no live count of any rule (exact), RSS bounded by store.maxKeys`, async () => {
    const cli = await serveCli(['--config', writeTemp('flood.yaml', CONFIG)]);
    try {
      await flood(cli, 'memory');
    } finally {
      await stopCli(cli);
    }
  });
});
