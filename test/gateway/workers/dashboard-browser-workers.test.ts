// The live dashboard of a --workers 2 gateway in a real headless Chromium: the page loads from the primary, shows every
// worker's decisions and the key limited across both, and a reset from the page admits the key in both workers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { get } from '../../http/support/http.js';
import { freePort } from '../../support/redis-server.js';
import { chromiumFixture } from '../support/chromium.js';
import { readiness, serveCli, sleep, startUpstream, stopCli, writeTemp, type Upstream } from '../support/harness.js';

const TOKEN = 'workers-dashboard-token-0123456789';

const chromium = chromiumFixture();
let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(async () => {
  await upstream.close();
});

describe('dashboard under --workers 2 in headless Chromium', { timeout: 120_000 }, () => {
  it("loads from the primary, shows both workers' decisions and the key limited in both, and resets it in both from the page", async () => {
    const port = await freePort();
    const adminPort = await freePort();
    const admin = `http://127.0.0.1:${adminPort}`;
    const yaml =
      `upstream: ${upstream.url}\nadmin:\n  listen: 127.0.0.1:${adminPort}\n  token: ${TOKEN}\n` +
      'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { name: burst, limit: 3, window: 1h }\n';
    const cli = await serveCli(['--config', writeTemp('floodgate.yaml', yaml), '--workers', '2', '--listen', `127.0.0.1:${port}`]);
    const page = await chromium.browser.newPage({ viewport: { width: 1100, height: 900 } });
    page.setDefaultTimeout(15_000);
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    // Each request on a fresh connection: node:cluster hands them to the workers in turn.
    const send = async (n: number): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i += 1) out.push((await get(`http://127.0.0.1:${port}/`, { headers: { 'x-api-key': 'w' } })).status);
      return out;
    };
    try {
      await cli.waitForLog(() => cli.logs.filter((l) => l.msg === 'floodgate gateway listening').length >= 2, 60_000);
      for (let i = 0; i < 200 && (await readiness(`${admin}/readyz`)).status !== 200; i += 1) await sleep(50);
      assert.deepEqual(await send(6), [200, 200, 200, 429, 429, 429]);

      await page.goto(`${admin}/admin/dashboard`);
      assert.equal(await page.title(), 'floodgate dashboard');
      await page.getByLabel('Admin token').fill(TOKEN);
      await page.getByRole('button', { name: 'Connect' }).click();
      await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
      const total = (outcome: string) =>
        page.locator(`#decisions tr[data-rule="api"][data-outcome="${outcome}"] td.total`).filter({ hasText: /^3$/ }).waitFor();
      // Three of each, though each worker decided only some of them.
      await total('allowed');
      await total('limited');
      const reset = page.getByRole('button', { name: 'Reset key w under policy burst of rule api' });
      await reset.waitFor();
      await reset.click();
      await page.getByRole('status').filter({ hasText: 'Key w reset under policy burst of rule api.' }).waitFor();
      assert.deepEqual(await send(4), [200, 200, 200, 429], 'the reset took effect in both workers');
      assert.deepEqual(problems, []);
    } finally {
      await page.close();
      assert.equal(await stopCli(cli), 0);
    }
  });
});
