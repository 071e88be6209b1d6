// Attacks on the dashboard in a real headless Chromium: keys that carry HTML and script, refused through the proxy and then shown and acted on in the page; the token kept out of URLs, storage that outlives the tab, and other origins; and the page refusing to be framed.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { adminBlock } from '../support/admin.js';
import { chromiumFixture } from '../support/chromium.js';
import { gatewayFixture, sleep } from '../support/harness.js';

const TOKEN = 'attack-dashboard-token-0123456789';

/** Keys a client may send that would run script if the page wrote them as HTML or into an attribute or URL unescaped. */
const HOSTILE = [
  `<img src=x onerror="document.title='pwned-img'">`,
  `"><script>document.title='pwned-script'</script>`,
  `</code></td></tr><svg onload="document.title='pwned-svg'">`,
  `javascript:document.title='pwned-url'`,
  `' onfocus='document.title="pwned-attr"' autofocus x='`,
  `&lt;b&gt;entity&lt;/b&gt;`,
];

const chromium = chromiumFixture();
const fixture = gatewayFixture();
let gateway: Gateway;
let framer: Server;

before(async () => {
  await fixture.ready();
  gateway = await fixture.start(
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}` +
      'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { limit: 1, window: 1h }\n',
  );
  // Another origin that tries to frame the dashboard.
  framer = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<!doctype html><title>framer</title><iframe id="f" src="${gateway.adminUrl}/admin/dashboard"></iframe>`);
  });
  await new Promise<void>((resolve) => framer.listen(0, '127.0.0.1', resolve));
});

after(() => {
  framer?.close();
});

async function status(key: string): Promise<number> {
  const res = await fetch(`${gateway.url}/x`, { headers: { 'x-api-key': key } });
  await res.arrayBuffer();
  return res.status;
}

describe('attack: the dashboard in headless Chromium', { timeout: 120_000 }, () => {
  it('holds: keys carrying HTML and script are shown as text, run nothing, and reset as themselves; the token stays in the tab and off every URL', async () => {
    for (const key of HOSTILE) {
      assert.equal(await status(key), 200);
      assert.equal(await status(key), 429);
    }
    const page = await chromium.browser.newPage();
    page.setDefaultTimeout(15_000);
    const problems: string[] = [];
    const urls: string[] = [];
    let dialogs = 0;
    page.on('pageerror', (error) => problems.push(error.message));
    page.on('dialog', (dialog) => {
      dialogs += 1;
      void dialog.dismiss();
    });
    page.on('request', (request) => urls.push(request.url()));
    try {
      await page.goto(`${gateway.adminUrl}/admin/dashboard`);
      await page.getByLabel('Admin token').fill(TOKEN);
      await page.getByRole('button', { name: 'Connect' }).click();
      await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
      const codes = page.locator('#limited tbody code');
      for (let i = 0; i < 300 && (await codes.count()) < HOSTILE.length; i += 1) await sleep(50);
      // Shown exactly as sent, character for character.
      assert.deepEqual((await codes.allTextContents()).sort(), [...HOSTILE].sort());
      assert.equal(await page.locator('#limited img, #limited svg, #limited script, #limited b, #limited [onfocus]').count(), 0);

      // Reset one from its row, and unblock another through the free-text form.
      const first = HOSTILE[0]!;
      await page.getByRole('button', { name: `Reset key ${first} under policy 1-per-1h of rule api` }).click();
      await page.getByRole('status').filter({ hasText: 'reset under policy 1-per-1h of rule api' }).waitFor();
      assert.equal(await status(first), 200, 'the key reset is the key refused');
      await page.getByLabel('Key', { exact: true }).fill(HOSTILE[1]!);
      await page.locator('#key-reset').click();
      await page.getByRole('status').filter({ hasText: 'reset under policy 1-per-1h of rule api' }).waitFor();
      assert.equal(await status(HOSTILE[1]!), 200);
      // A few more updates with the keys on the page, then nothing ran.
      await sleep(2500);
      assert.equal(await page.title(), 'floodgate dashboard');
      assert.equal(dialogs, 0);
      assert.deepEqual(problems, []);

      // The token: in this tab's session storage only, in no URL, sent to no other origin.
      assert.equal(await page.evaluate('localStorage.length'), 0);
      assert.equal(await page.evaluate(`sessionStorage.getItem('floodgate-admin-token')`), TOKEN);
      assert.ok(!page.url().includes(TOKEN));
      assert.ok(urls.length > 2);
      for (const url of urls) {
        assert.ok(url.startsWith(`${gateway.adminUrl}/admin/`), `a request left the admin listener: ${url}`);
        assert.ok(!url.includes(TOKEN), `the token is in a URL: ${url}`);
      }
    } finally {
      await page.close();
    }
  });

  it('holds: another origin that frames the dashboard gets nothing (frame-ancestors none, X-Frame-Options DENY), so no click can be stolen', async () => {
    const page = await chromium.browser.newPage();
    page.setDefaultTimeout(15_000);
    try {
      await page.goto(`http://127.0.0.1:${(framer.address() as AddressInfo).port}/`);
      // goto waits for the load event, which waits for the frame.
      const frame = page.frames().find((f) => f !== page.mainFrame());
      assert.ok(frame !== undefined);
      // A refused frame is Chromium's error page: no login form, no button of the dashboard.
      assert.equal(await frame.locator('#login, #board, button').count(), 0);
    } finally {
      await page.close();
    }
  });
});
