// The gateway's overload section through a real gateway and a real upstream: the in-flight limit holds, waiting requests
// are served by class and round-robin by tenant, refusals say why, and a client that leaves at any point leaves nothing held.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ErrorCode } from '../../../src/core/errors.js';
import { ConfigError } from '../../../src/gateway/config/config-error.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get, leaveAfter } from '../../http/support/http.js';
import { parseMetrics, serveCli, sleep, startGateway, stopCli, writeTemp } from '../support/harness.js';
import { freePort } from '../../support/redis-server.js';
import { ruleWarnings } from '../../../src/gateway/rules/rule-warnings.js';

/** An upstream that answers `/?ms=N&id=X` after N ms (503 for `/busy`), and records the order requests reached it and how many ran at once. */
interface Recording {
  url: string;
  server: Server;
  order: string[];
  now: number;
  most: number;
}

async function startRecording(): Promise<Recording> {
  const up: Recording = { url: '', server: undefined as unknown as Server, order: [], now: 0, most: 0 };
  up.server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    up.order.push(url.searchParams.get('id') ?? '-');
    up.now += 1;
    up.most = Math.max(up.most, up.now);
    let done = false;
    res.on('close', () => {
      if (!done) up.now -= 1;
      done = true;
    });
    setTimeout(
      () => {
        if (done) return;
        done = true;
        up.now -= 1;
        res.writeHead(url.pathname === '/busy' ? 503 : 200, { 'content-type': 'text/plain' });
        res.end('ok');
      },
      Number(url.searchParams.get('ms') ?? 0),
    );
  });
  await new Promise<void>((resolve) => up.server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(up.server.address() as AddressInfo).port}`;
  return up;
}

const CLASSES = `
  priorities:
    - { name: critical, match: { path: /critical } }
    - { name: default }
    - { name: sheddable, match: { path: /batch } }`;

async function metricsOf(gw: Gateway): Promise<Map<string, number>> {
  const r = await get(`${gw.url}/_floodgate/metrics`);
  return parseMetrics(r.body);
}

describe('overload: the in-flight limit and its queue', () => {
  let up: Recording;
  let gw: Gateway;
  const base = (): string => gw.url;
  before(async () => {
    up = await startRecording();
  });
  after(async () => {
    await gw?.shutdown();
    await new Promise((r) => up.server.close(r));
  });

  it('never lets more than a fixed limit reach the upstream at once, and the others wait their turn', async () => {
    gw = await startGateway(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 2\n  queue: { timeout: 5s, maxQueue: 100 }\n`);
    up.most = 0;
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => get(`${base()}/?ms=100&id=${i}`)));
    assert.deepEqual(
      replies.map((r) => r.status),
      Array(8).fill(200),
    );
    assert.equal(up.most, 2);
    const m = await metricsOf(gw);
    assert.equal(m.get('floodgate_overload_limit'), 2);
    assert.equal(m.get('floodgate_overload_in_flight'), 0);
    assert.equal(m.get('floodgate_overload_decisions_total{priority="default",outcome="admitted"}'), 2);
    assert.equal(m.get('floodgate_overload_decisions_total{priority="default",outcome="waited"}'), 6);
    await gw.shutdown();
  });

  it('serves the highest class first: a critical request overtakes sheddable ones that came before it', async () => {
    gw = await startGateway(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n${CLASSES}\n`);
    up.order = [];
    const first = get(`${base()}/?ms=200&id=first`);
    await sleep(50);
    const batch = [get(`${base()}/batch?ms=10&id=b1`), get(`${base()}/batch?ms=10&id=b2`)];
    await sleep(20);
    const critical = get(`${base()}/critical?ms=10&id=c`);
    await Promise.all([first, critical, ...batch]);
    assert.deepEqual(up.order, ['first', 'c', 'b1', 'b2']);
    await gw.shutdown();
  });

  it('serves waiting tenants in turn: a quiet tenant is not stuck behind a noisy one', async () => {
    gw = await startGateway(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  tenant: header:x-tenant\n`);
    up.order = [];
    const first = get(`${base()}/?ms=200&id=first`);
    await sleep(50);
    const noisy = [0, 1, 2, 3].map((i) => get(`${base()}/?ms=10&id=n${i}`, { headers: { 'x-tenant': 'noisy' } }));
    await sleep(20);
    const quiet = [0, 1].map((i) => get(`${base()}/?ms=10&id=q${i}`, { headers: { 'x-tenant': 'quiet' } }));
    await Promise.all([first, ...noisy, ...quiet]);
    assert.deepEqual(up.order, ['first', 'n0', 'q0', 'n1', 'q1', 'n2', 'n3']);
    await gw.shutdown();
  });

  it('refuses with 503, Retry-After and Floodgate-Overload naming why: a full queue, a wait past its timeout', async () => {
    gw = await startGateway(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  queue: { timeout: 200ms, maxQueue: 1 }\n`);
    const first = get(`${base()}/?ms=600&id=first`);
    await sleep(50);
    const waiting = get(`${base()}/?ms=10&id=w`);
    await sleep(20);
    const full = await get(`${base()}/?ms=10&id=f`);
    assert.equal(full.status, 503);
    assert.equal(full.headers['floodgate-overload'], 'full');
    assert.equal(full.headers['retry-after'], '1');
    assert.match(String(full.headers['content-type']), /problem\+json/);
    const timedOut = await waiting;
    assert.equal(timedOut.status, 503);
    assert.equal(timedOut.headers['floodgate-overload'], 'timeout');
    assert.equal((await first).status, 200);
    await gw.shutdown();
  });

  it('a client that hangs up while waiting leaves no waiter and takes no slot; one that hangs up mid-exchange frees its slot', async () => {
    gw = await startGateway(`upstream: ${up.url}\nrules: []\noverload:\n  limit: 1\n  queue: { timeout: 5s, maxQueue: 100 }\n`);
    up.order = [];
    const first = get(`${base()}/?ms=300&id=first`);
    await sleep(50);
    // Five clients queue and leave before the slot frees.
    await Promise.all([0, 1, 2, 3, 4].map((i) => leaveAfter(`${base()}/?ms=10&id=gone${i}`, 50)));
    let m = await metricsOf(gw);
    assert.equal(m.get('floodgate_overload_queued{priority="default"}'), 0);
    await first;
    assert.deepEqual(up.order, ['first']);
    // One leaves while the upstream works on its request: its slot comes back, the next request is admitted at once.
    await leaveAfter(`${base()}/?ms=300&id=cut`, 50);
    await sleep(350);
    const next = await get(`${base()}/?ms=1&id=next`);
    assert.equal(next.status, 200);
    m = await metricsOf(gw);
    assert.equal(m.get('floodgate_overload_in_flight'), 0);
    await gw.shutdown();
  });

  it('reads the upstream’s 503 as overload: the adaptive limit backs off', async () => {
    gw = await startGateway(
      `upstream: ${up.url}\nrules: []\noverload:\n  adaptive: { initialLimit: 20, probeSamples: 1, sampleWindow: 10ms, minSamples: 1 }\n`,
    );
    // The first (probe) request, then enough 503s to close several windows.
    await get(`${base()}/?ms=1`);
    for (let i = 0; i < 20; i++) await get(`${base()}/busy?ms=1`);
    const m = await metricsOf(gw);
    assert.ok(m.get('floodgate_overload_limit')! < 20, `limit ${m.get('floodgate_overload_limit')}`);
    await gw.shutdown();
  });
});

describe('overload: configuration errors', () => {
  const fails = async (yaml: string, field: string, pattern: RegExp): Promise<void> => {
    await assert.rejects(parseConfigText(yaml, 'test.yaml'), (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.equal(e.code, ErrorCode.INVALID_CONFIG);
      assert.equal(e.field, field);
      assert.match(e.message, pattern);
      return true;
    });
  };
  const head = 'upstream: http://127.0.0.1:1\nrules: []\n';

  it('needs an upstream', () => fails('rules: []\noverload: { limit: 5 }\n', 'overload', /upstream/));
  it('needs exactly one class without a match', async () => {
    await fails(`${head}overload:\n  priorities: [{ name: a, match: { path: /a } }]\n`, 'overload.priorities', /without a match/);
    await fails(`${head}overload:\n  priorities: [a, b]\n`, 'overload.priorities', /2 classes without a match/);
  });
  it('refuses adaptive options with a fixed limit, and bad adaptive options by the library’s check', async () => {
    await fails(`${head}overload: { limit: 5, adaptive: { maxLimit: 9 } }\n`, 'overload.adaptive', /limit is 5/);
    await fails(`${head}overload: { adaptive: { minLimit: 50, maxLimit: 10 } }\n`, 'overload.adaptive', /minLimit 50 is above maxLimit 10/);
    await fails(`${head}overload: { adaptive: { maxLimt: 10 } }\n`, 'overload.adaptive', /maxLimt/);
  });
  it('refuses a tenantShare out of (0, 1], or one with tenant: global (nothing to share between)', async () => {
    await fails(`${head}overload: { tenant: "header:x-t", tenantShare: 0 }\n`, 'overload.tenantShare', /above 0 and at most 1/);
    await fails(`${head}overload: { tenantShare: 0.5, tenant: global }\n`, 'overload.tenantShare', /tenant is global/);
  });
  it('refuses an adaptive minLimit above proxy.connections when maxLimit is left to default to it', () =>
    fails(
      `${head}proxy: { connections: 8 }\noverload: { adaptive: { minLimit: 9 } }\n`,
      'overload.adaptive.minLimit',
      /above proxy.connections 8/,
    ));
  it('refuses a tenant it cannot read, a class named twice, a queue over a minute, an unknown field', async () => {
    await fails(`${head}overload: { tenant: "jwt:sub" }\n`, 'overload.tenant', /ip, global or header/);
    await fails(`${head}overload: { priorities: [a, { name: a, match: { path: /x } }] }\n`, 'overload.priorities[1].name', /twice/);
    await fails(`${head}overload: { queue: { timeout: 2m } }\n`, 'overload.queue.timeout', /at most 1m/);
    await fails(`${head}overload: { limits: 3 }\n`, 'overload.limits', /./);
  });
});

describe('overload: a limit above the connection pool', () => {
  it('warns (FLOODGATE_OVERLOAD_ABOVE_POOL) of a fixed limit or a maxLimit above proxy.connections, and not of the default', async () => {
    const warned = async (overload: string): Promise<number> => {
      const settings = await parseConfigText(
        `upstream: http://127.0.0.1:1\nrules: []\nproxy: { connections: 16 }\noverload: ${overload}\n`,
        'test.yaml',
      );
      return ruleWarnings(settings).filter((w) => w.code === 'FLOODGATE_OVERLOAD_ABOVE_POOL').length;
    };
    assert.equal(await warned('{ limit: 32 }'), 1);
    assert.equal(await warned('{ adaptive: { maxLimit: 64 } }'), 1);
    assert.equal(await warned('{ adaptive: {} }'), 0);
    assert.equal(await warned('{ limit: 16 }'), 0);
  });
});

describe('overload: a class a client can claim', () => {
  it('warns (FLOODGATE_PRIORITY_FROM_HEADER) of a class above the default given by a header alone, not of one by path or a lower one', async () => {
    const settings = await parseConfigText(
      `upstream: http://127.0.0.1:1
rules: []
overload:
  priorities:
    - { name: critical, match: { headers: { x-priority: critical } } }
    - { name: checkout, match: { path: /checkout, headers: { x-priority: critical } } }
    - { name: default }
    - { name: sheddable, match: { headers: { x-batch: "1" } } }
`,
      'test.yaml',
    );
    const warned = ruleWarnings(settings).filter((w) => w.code === 'FLOODGATE_PRIORITY_FROM_HEADER');
    assert.equal(warned.length, 1);
    assert.match(warned[0]!.message, /"critical".*x-priority/);
  });
});

describe('overload: reload', () => {
  it('keeps the learnt limit (and its slots) when a reload changes other proxy settings, and starts afresh when it changes the section', async () => {
    const up = await startRecording();
    const yaml = (extra: string, limit: number): string =>
      `upstream: ${up.url}\nrules: []\nproxy: { clientWriteTimeout: ${extra} }\noverload: { adaptive: { initialLimit: 7, minLimit: ${limit} } }\n`;
    const gw = await startGateway(yaml('30s', 1));
    try {
      const gate = (gw as unknown as { proxy: { gate: unknown } }).proxy.gate;
      gw.apply(await parseConfigText(yaml('20s', 1), 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false }));
      assert.equal((gw as unknown as { proxy: { gate: unknown } }).proxy.gate, gate, 'the same gate after an unrelated change');
      gw.apply(await parseConfigText(yaml('20s', 2), 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false }));
      assert.notEqual((gw as unknown as { proxy: { gate: unknown } }).proxy.gate, gate, 'a new gate for a new section');
    } finally {
      await gw.shutdown();
      await new Promise((r) => up.server.close(r));
    }
  });
});

describe('overload: under --workers', () => {
  it('each worker has its own limit, and /metrics sums them', async () => {
    const up = await startRecording();
    const port = await freePort();
    const cli = await serveCli([
      '--config',
      writeTemp('overload.yaml', `upstream: ${up.url}\nrules: []\noverload:\n  limit: 3\n`),
      '--workers',
      '2',
      '--listen',
      `127.0.0.1:${port}`,
    ]);
    try {
      const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => get(`http://127.0.0.1:${port}/?ms=100&id=${i}`)));
      assert.deepEqual(
        replies.map((r) => r.status),
        Array(12).fill(200),
      );
      // Two workers, 3 each: never more than 6 at the upstream.
      assert.ok(up.most <= 6, `most at once ${up.most}`);
      const m = parseMetrics((await get(`http://127.0.0.1:${port}/_floodgate/metrics`)).body);
      assert.equal(m.get('floodgate_overload_limit'), 6);
    } finally {
      await stopCli(cli);
      await new Promise((r) => up.server.close(r));
    }
  });
});
