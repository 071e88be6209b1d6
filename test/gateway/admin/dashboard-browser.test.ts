// The live dashboard in a real headless Chromium while load runs through a gateway on Redis: the token prompt, numbers that move and agree with /metrics, and a blocked key reset and another unblocked from the page under the policy that refused it (keys . and .. too), each then admitted. Screenshots go to test-output/dashboard/.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { encodeSegment } from '../../../src/gateway/admin/admin-http.js';
import { adminBlock, adminFetch } from '../support/admin.js';
import { chromiumFixture } from '../support/chromium.js';
import { parseMetrics, sleep } from '../support/harness.js';
import { redisGatewayFixture } from '../support/redis-gateway.js';

const TOKEN = 'browser-dashboard-token-0123456789';
const OUTPUT = new URL('../../../test-output/dashboard/', import.meta.url).pathname;

const chromium = chromiumFixture();
const fixture = redisGatewayFixture();
let gateway: Gateway;

before(async () => {
  mkdirSync(OUTPUT, { recursive: true });
  await fixture.ready();
  gateway = await fixture.start(
    `upstream: ${fixture.upstream.url}\n${adminBlock(TOKEN)}` +
      `store: { type: redis, url: "${fixture.redis.url}", onFailure: insurance }\n` +
      'rules:\n  - name: api\n    key: { header: x-api-key }\n    policies:\n      - { name: per-second, limit: 5, window: 1s }\n' +
      '  - name: search\n    match: { path: /search }\n    key: ip\n    policies:\n      - { name: per-minute, limit: 50, window: 1m }\n',
  );
});

/** Requests through the gateway until stopped: a few hot keys over their limit, many within it, and whatever `extra` holds. */
function startLoad(extra: Set<string>): { stop(): Promise<void> } {
  let running = true;
  const worker = async (id: number): Promise<void> => {
    for (let i = 0; running; i += 1) {
      const hot = [...extra, 'hot-a', 'hot-b'];
      const key = i % 3 === 0 ? hot[i % hot.length]! : `user-${id}-${i % 25}`;
      const path = i % 10 === 0 ? '/search' : '/x';
      const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': key } }).catch(() => undefined);
      await res?.arrayBuffer();
      // Leaves the two cores to the browser and the gateway.
      await sleep(10);
    }
  };
  const workers = [0, 1, 2, 3].map(worker);
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return parseMetrics(text).get(name) ?? 0;
}

interface Shown {
  /** Taken just before the stats shown were read (the gateway's clock, which is this process's). */
  at: number;
  allowed: number;
  limited: number;
  rate: string;
}

/** What the page shows for rule api now, read in one go. */
function shown(page: Page): Promise<Shown> {
  // A string: this runs in the page, and the tests compile without the DOM's types.
  return page.evaluate(`(() => {
    const cell = (outcome, name) => document.querySelector('#decisions tr[data-rule="api"][data-outcome="' + outcome + '"] td.' + name);
    const n = (outcome) => Number((cell(outcome, 'total')?.textContent ?? 'NaN').replace(/,/g, ''));
    return { at: Number(document.getElementById('updated').dataset.at), allowed: n('allowed'), limited: n('limited'), rate: cell('allowed', 'rate')?.textContent ?? '' };
  })()`);
}

/** The per-second rate of allowed decisions the page shows. */
const rate = (s: Shown): number => Number(s.rate.replace(/,/g, ''));

/** Waits until the page shows stats read after `since` (ms since the epoch). */
async function shownAfter(page: Page, since: number): Promise<Shown> {
  // Polled from here: waitForFunction's string form runs eval in the page, which its Content-Security-Policy forbids.
  for (let tries = 0; ; tries += 1) {
    const now = await shown(page);
    if (now.at > since) return now;
    if (tries > 300) throw new Error(`the page showed no stats read after ${since} within 15 s`);
    await sleep(50);
  }
}

async function status(key: string): Promise<number> {
  const res = await fetch(`${gateway.url}/x`, { headers: { 'x-api-key': key } });
  await res.arrayBuffer();
  return res.status;
}

async function block(key: string): Promise<void> {
  const res = await adminFetch(
    gateway.adminUrl!,
    TOKEN,
    'POST',
    `/admin/rules/api/keys/${encodeSegment(key)}/block`,
    '{"duration":"forever"}',
  );
  assert.equal(res.status, 200, await res.text());
}

describe('dashboard in headless Chromium', () => {
  it('shows moving numbers that agree with /metrics, and resets and unblocks keys from the page', async () => {
    const extra = new Set<string>();
    const load = startLoad(extra);
    const page = await chromium.browser.newPage({ viewport: { width: 1100, height: 900 } });
    page.setDefaultTimeout(15_000);
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    // A Content-Security-Policy violation (a hash that does not match) shows here, as would a failed request.
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    try {
      await page.goto(`${gateway.adminUrl}/admin/dashboard`);
      assert.equal(await page.title(), 'floodgate dashboard');

      // A wrong token: a clear message, and the prompt again.
      await page.getByLabel('Admin token').fill('not-the-token');
      await page.getByRole('button', { name: 'Connect' }).click();
      await page.getByRole('alert').filter({ hasText: 'refused this token' }).waitFor();
      await page.screenshot({ path: join(OUTPUT, 'wrong-token.png') });
      problems.length = 0; // the 401 itself is logged by the browser as a failed request

      // The right one, by keyboard alone.
      await page.getByLabel('Admin token').focus();
      await page.keyboard.type(TOKEN);
      await page.keyboard.press('Enter');
      await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor();
      assert.equal(await page.getByLabel('Admin token').isVisible(), false);

      // The page's count lies between /metrics read before the stats it shows and /metrics read after.
      const series = 'floodgate_decisions_total{rule="api",outcome="allowed"}';
      const limitedSeries = 'floodgate_decisions_total{rule="api",outcome="limited"}';
      const before1 = [await metric(series), await metric(limitedSeries)];
      const first = await shownAfter(page, Date.now());
      const after1 = [await metric(series), await metric(limitedSeries)];
      assert.ok(before1[0]! <= first.allowed && first.allowed <= after1[0]!, `${before1[0]} ≤ ${first.allowed} ≤ ${after1[0]}`);
      assert.ok(before1[1]! <= first.limited && first.limited <= after1[1]!, `${before1[1]} ≤ ${first.limited} ≤ ${after1[1]}`);
      // The load goes on, so both counts grow from one update to a later one (a loaded machine may need a few).
      let second = await shownAfter(page, first.at);
      for (let i = 0; i < 10 && !(second.allowed > first.allowed && second.limited > first.limited && rate(second) > 0); i += 1)
        second = await shownAfter(page, second.at);
      assert.ok(second.allowed > first.allowed, `allowed moves: ${first.allowed} then ${second.allowed}`);
      assert.ok(second.limited > first.limited, `limited moves: ${first.limited} then ${second.limited}`);
      assert.match(second.rate, /^[\d,.]+$/, 'a per-second rate once there are two reads');
      assert.ok(rate(second) > 0, second.rate);
      // Store health: the Redis store, its breaker closed, its latency measured.
      await page
        .locator('#store-desc')
        .filter({ hasText: /^redis .*: connected$/ })
        .waitFor();
      assert.deepEqual(await page.locator('#health tbody tr[data-rule="api"] td').allTextContents(), [
        'per-second',
        'closed',
        'insurance',
        'no',
      ]);
      // A p50 bound shows once an update spans some timed calls.
      await page
        .locator('#latency tbody tr[data-result="ok"] td:nth-of-type(4)')
        .filter({ hasText: /^≤ [\d.,]+$/ })
        .waitFor();

      // Paused, the page reads nothing more (the load goes on); resumed, it reads again.
      const pause = page.getByRole('button', { name: 'Pause updates' });
      await pause.click();
      await page.getByRole('status').filter({ hasText: 'Updates paused.' }).waitFor();
      assert.equal(await pause.getAttribute('aria-pressed'), 'true');
      const frozen = await shown(page);
      await sleep(2500);
      assert.deepEqual(await shown(page), frozen);
      await pause.click();
      assert.equal(await pause.getAttribute('aria-pressed'), 'false');
      await shownAfter(page, frozen.at);

      // A key blocked through the API shows among the most-limited once its requests are refused.
      await block('victim');
      extra.add('victim');
      const reset = page.getByRole('button', { name: 'Reset key victim under policy per-second of rule api' });
      await reset.waitFor();
      // The row says which policy refused the key.
      assert.deepEqual((await page.locator('#limited tbody tr[data-key="victim"] td').allTextContents()).slice(0, 2), [
        'per-second',
        'victim',
      ]);
      await page.screenshot({ path: join(OUTPUT, 'dashboard.png'), fullPage: true });
      extra.delete('victim'); // so the load spends none of its fresh quota before the check below
      assert.equal(await status('victim'), 429);
      await reset.click();
      await page.getByRole('status').filter({ hasText: 'Key victim reset under policy per-second of rule api.' }).waitFor();
      assert.equal(await status('victim'), 200, 'admitted after the reset from the page');

      // A key the list may not show: unblocked from the form, by keyboard.
      await block('quiet');
      assert.equal(await status('quiet'), 429);
      await page.getByLabel('Rule', { exact: true }).selectOption('api');
      assert.equal(await page.getByLabel('Policy', { exact: true }).inputValue(), 'per-second');
      await page.getByLabel('Key', { exact: true }).focus();
      await page.keyboard.type('quiet');
      await page.keyboard.press('Tab'); // Reset
      await page.keyboard.press('Tab'); // Unblock
      await page.keyboard.press('Enter');
      await page.getByRole('status').filter({ hasText: 'Key quiet unblocked under policy per-second of rule api.' }).waitFor();
      assert.equal(await status('quiet'), 200, 'admitted after the unblock from the page');

      // The dashboard cannot reset keys . and ..: a URL parser would drop them as dot segments (%2E too), so the page
      // sends them as "=" + base64url, which the API reads back.
      await block('.');
      await block('..');
      extra.add('.');
      const dot = page.getByRole('button', { name: 'Reset key . under policy per-second of rule api' });
      await dot.waitFor();
      extra.delete('.');
      assert.equal(await status('.'), 429);
      await dot.click();
      await page.getByRole('status').filter({ hasText: 'Key . reset under policy per-second of rule api.' }).waitFor();
      assert.equal(await status('.'), 200, '"." admitted after the reset from the page');
      assert.equal(await status('..'), 429, '".." still blocked: the reset of "." was that key alone');
      await page.getByLabel('Key', { exact: true }).fill('..');
      await page.getByRole('button', { name: 'Unblock', exact: true }).click();
      await page.getByRole('status').filter({ hasText: 'Key .. unblocked under policy per-second of rule api.' }).waitFor();
      assert.equal(await status('..'), 200, '".." admitted after the unblock from the form');
      await page.screenshot({ path: join(OUTPUT, 'after-unblock.png'), fullPage: true });

      // Forgetting the token stops the polling and asks again.
      await page.getByRole('button', { name: 'Forget token' }).click();
      await page.getByLabel('Admin token').waitFor();
      assert.equal(await page.evaluate('sessionStorage.length'), 0);
      assert.deepEqual(problems, []);
    } finally {
      await page.close();
      await load.stop();
    }
  });
});
