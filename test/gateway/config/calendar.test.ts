// Calendar windows in the gateway config: `window: month` with a `timeZone`, the errors `floodgate check` reports at the field's line, and the RateLimit reset a served request gets.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { periodBounds } from '../../../src/core/calendar.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { get, readIetf } from '../../http/support/http.js';
import { rejectsConfig } from '../support/config-errors.js';
import { startGateway, startUpstream, type Upstream } from '../support/harness.js';

const rule = (policy: string): string => `rules:\n  - name: a\n    policies:\n      - ${policy}\n`;

describe('config: calendar windows', () => {
  it('takes window: day, week or month with a timeZone (and weekStart for weeks)', async () => {
    const settings = await parseConfigText(
      `rules:
  - name: a
    policies:
      - { limit: 10000, window: month, timeZone: Europe/Berlin }
      - { limit: 500, window: day, timeZone: America/New_York }
      - { limit: 2000, window: week, timeZone: UTC, weekStart: 0 }
      - { limit: 500, window: 1d }
`,
      'gw.yaml',
    );
    assert.deepEqual(
      settings.rules[0]!.policies.map((p) => [p.calendar, p.windowMs]),
      [
        [{ unit: 'month', timeZone: 'Europe/Berlin', weekStart: 1 }, (31 * 24 + 1) * 3_600_000],
        [{ unit: 'day', timeZone: 'America/New_York', weekStart: 1 }, 25 * 3_600_000],
        [{ unit: 'week', timeZone: 'UTC', weekStart: 0 }, (7 * 24 + 1) * 3_600_000],
        [undefined, 86_400_000],
      ],
    );
  });

  it('reports a missing or unknown zone, a zone on a duration window, another algorithm and the short form at the field', async () => {
    await rejectsConfig(
      rule('{ limit: 3, window: month }'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]\.window: a calendar window needs the time zone its month follows/,
    );
    await rejectsConfig(
      rule('{ limit: 3, window: month, timeZone: Mars/Olympus }'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]\.timeZone: must be an IANA time zone such as "UTC" or "Europe\/Berlin"; got "Mars\/Olympus"\.$/,
    );
    await rejectsConfig(
      rule('{ limit: 3, window: 30d, timeZone: UTC }'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]\.timeZone: applies to calendar windows only \(window: day, week or month\)/,
    );
    await rejectsConfig(
      rule('{ limit: 3, window: month, timeZone: UTC, algorithm: token-bucket }'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]\.algorithm: calendar windows are fixed windows/,
    );
    await rejectsConfig(
      rule('{ limit: 3, window: month, timeZone: UTC, weekStart: 0 }'),
      /policies\[0\]\.weekStart: applies to weeks only/,
    );
    await rejectsConfig(
      rule('{ limit: 3, window: week, timeZone: UTC, weekStart: 7 }'),
      /policies\[0\]\.weekStart: must be a day of the week from 0/,
    );
    await rejectsConfig(
      rule('"10000/month"'),
      /^gw\.yaml:4:\d+: rules\[0\]\.policies\[0\]: a calendar window needs its time zone: write the policy as \{ limit: 10000, window: month/,
    );
  });

  it('a monthly and a 745-hour policy are different policies of one rule', async () => {
    await parseConfigText(rule('{ limit: 3, window: month, timeZone: UTC }\n      - { limit: 3, window: 745h }'), 'gw.yaml');
    await rejectsConfig(
      rule('{ limit: 3, window: month, timeZone: UTC }\n      - { limit: 3, window: month, timeZone: UTC }'),
      /policies\[1\]: has the name "3-per-month" of another policy/,
    );
  });
});

describe('gateway: a calendar policy on real time', () => {
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream.close());

  it('RateLimit t counts down to the end of the day in the zone', async (t) => {
    const g = await startGateway(`upstream: ${upstream.url}\n${rule('{ name: daily, limit: 5, window: day, timeZone: Asia/Tokyo }')}`);
    try {
      const period = { unit: 'day', timeZone: 'Asia/Tokyo' } as const;
      const before = Date.now();
      const reply = await get(`${g.url}/x`);
      const after = Date.now();
      const end = periodBounds(period, before).end;
      if (end !== periodBounds(period, after).end) return t.skip('the day ended during the request');
      assert.equal(reply.status, 200);
      const daily = readIetf(reply.headers).get('daily')!;
      assert.equal(daily.r, 4);
      // The reset was computed at some instant between the two readings.
      assert.ok(daily.t! >= Math.ceil((end - after) / 1000) && daily.t! <= Math.ceil((end - before) / 1000), `t=${daily.t}`);
    } finally {
      await g.shutdown();
    }
  });
});
