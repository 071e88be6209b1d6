// F1: a client naming end-to-end headers in Connection (the key header, a match header, a cost header) must not make the gateway count one request and the upstream serve another. Prints the variant table.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { gatewayFixture, sleep } from '../support/harness.js';
import { sendRaw } from '../support/raw.js';

const fixture = gatewayFixture();

/** The one API key the upstream knows outside /v1/; any other key it answers 401, and a request without one is served as anonymous. */
const KNOWN_KEY = 'k-good1';
/** Units the upstream reports spent per /v1/ answer. */
const USAGE = 7;

/** An upstream that treats a request without `x-api-key` as anonymous, refuses unknown keys, and records the headers it saw. */
interface KeyedUpstream {
  url: string;
  server: Server;
  seen: IncomingHttpHeaders[];
}

async function startKeyedUpstream(): Promise<KeyedUpstream> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push(req.headers);
      const key = req.headers['x-api-key'];
      // The token API (/v1/) serves every key it is given and reports what each answer cost.
      const known = key === KNOWN_KEY || (key !== undefined && req.url?.startsWith('/v1/') === true);
      if (key !== undefined && !known) {
        res.writeHead(401, { 'content-type': 'text/plain' });
        res.end('unknown key\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'x-usage-tokens': String(USAGE) });
      res.end(key === undefined ? 'anonymous\n' : 'known\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, seen };
}

const config = (upstream: string): string => `upstream: ${upstream}
rules:
  - name: tenant
    match: { path: /tenant/, headers: { x-tenant: acme } }
    key: ip
    policies: ["1000/1h"]
  - name: tokens
    match: { path: /v1/ }
    key: header:x-api-key
    policies: ["1000/1h"]
    cost: { estimate: 1, header: x-usage-tokens }
    final: true
  - name: api
    key: { header: x-api-key, fallbackToIp: true, pattern: "k-[a-z0-9]{4,32}" }
    policies: ["5/1m"]
`;

/** A raw request: `path`, then `lines` exactly as written (Connection lines included), then `Connection: close` as every raw test request ends. */
const raw = (path: string, lines: readonly string[]): string =>
  `GET ${path} HTTP/1.1\r\nHost: api.example.com\r\n${lines.map((l) => `${l}\r\n`).join('')}Connection: close\r\n\r\n`;

/** A variant: its name, the path it aims at, and the Connection (or other) lines it adds to the headers the rules read. */
type Variant = readonly [name: string, path: string, connection: readonly string[]];

const VARIANTS: readonly Variant[] = [
  ['key header', '/api/x', ['Connection: x-api-key']],
  ['key header, title case', '/api/x', ['Connection: X-Api-Key']],
  ['key header, upper case', '/api/x', ['Connection: X-API-KEY']],
  ['close, then key header', '/api/x', ['Connection: close, X-Api-Key']],
  ['keep-alive, then key header', '/api/x', ['Connection: keep-alive, x-api-key']],
  ['spaces around commas', '/api/x', ['Connection:  keep-alive ,   x-api-key  ,close ']],
  ['tab before the name', '/api/x', ['Connection:\tx-api-key']],
  ['empty list elements', '/api/x', ['Connection: ,, x-api-key ,,']],
  ['two Connection lines', '/api/x', ['Connection: keep-alive', 'Connection: x-api-key']],
  ['upgrade and key header', '/api/x', ['Connection: Upgrade, x-api-key']],
  ['Proxy-Connection', '/api/x', ['Proxy-Connection: x-api-key']],
  ['Keep-Alive names it', '/api/x', ['Connection: keep-alive', 'Keep-Alive: x-api-key']],
  ['match header', '/tenant/x', ['Connection: x-tenant']],
  ['match header, upper case', '/tenant/x', ['Connection: X-TENANT']],
  ['match and key headers', '/tenant/x', ['Connection: x-tenant, x-api-key']],
  ['cost rule key header', '/v1/x', ['Connection: x-api-key']],
  ['cost header', '/v1/x', ['Connection: x-usage-tokens']],
  ['cost header, mixed case', '/v1/x', ['Connection: X-Usage-Tokens, x-api-key']],
  ['every read header', '/tenant/x', ['Connection: x-api-key, x-tenant, x-usage-tokens, x-forwarded-for']],
];

/** One row of the printed table. */
interface Row {
  variant: string;
  status: string;
  keySeen: string;
  tenantSeen: string;
  charged: string;
  verdict: string;
}

describe('attack: Connection naming end-to-end headers', () => {
  let upstream: KeyedUpstream;
  before(async () => {
    await fixture.ready();
    upstream = await startKeyedUpstream();
  });
  after(async () => {
    upstream.server.closeAllConnections();
    await new Promise<void>((resolve) => upstream.server.close(() => resolve()));
  });

  test('F1: Connection: x-api-key does not hide the key header a rule counts', async () => {
    const g = await fixture.start(config(upstream.url));
    const anonymous: number[] = [];
    for (let i = 0; i < 6; i += 1) anonymous.push((await sendRaw(g.url, raw('/api/x', []))).statuses[0] ?? 0);
    assert.deepEqual(anonymous, [200, 200, 200, 200, 200, 429], 'the anonymous limit of this address is 5/1m');
    const servedBefore = upstream.seen.filter((h) => h['x-api-key'] === undefined).length;
    const hidden: number[] = [];
    for (let i = 0; i < 30; i += 1) {
      const reply = await sendRaw(g.url, raw('/api/x', [`X-Api-Key: k-madeup${i}`, 'Connection: x-api-key']));
      hidden.push(reply.statuses[0] ?? 0);
    }
    const anonymousServed = upstream.seen.filter((h) => h['x-api-key'] === undefined).length - servedBefore;
    console.log(
      `# made-up keys named in Connection: ${hidden.filter((s) => s === 200).length} × 200, ${anonymousServed} served as anonymous`,
    );
    assert.equal(anonymousServed, 0, 'the upstream served anonymous requests the gateway counted under made-up keys');
    assert.deepEqual(new Set(hidden), new Set([401]), 'each made-up key reached the upstream, which refused it');
  });

  test(`F1: no variant makes the upstream see other headers than the rules read (${VARIANTS.length} variants)`, async (t) => {
    const g = await fixture.start(config(upstream.url));
    const rows: Row[] = [];
    for (const [index, [variant, path, lines]] of VARIANTS.entries()) {
      const key = `k-variant${index}`;
      const sent = [`X-Api-Key: ${key}`, ...(path.startsWith('/tenant/') ? ['X-Tenant: acme'] : []), ...lines];
      const before = upstream.seen.length;
      const reply = await sendRaw(g.url, raw(path, sent));
      const seen = upstream.seen.length > before ? upstream.seen[upstream.seen.length - 1] : undefined;
      let charged = '-';
      if (path.startsWith('/v1/')) {
        // The upstream reported USAGE units; the next request of the same key shows what the first was charged.
        await sleep(30);
        const next = await sendRaw(g.url, raw(path, [`X-Api-Key: ${key}`]));
        const remaining = /ratelimit: .*r=(\d+)/i.exec(next.text)?.[1];
        charged = remaining === undefined ? '?' : String(1000 - 1 - Number(remaining));
      }
      const keyOk = seen?.['x-api-key'] === key;
      const tenantOk = !path.startsWith('/tenant/') || seen?.['x-tenant'] === 'acme';
      const costOk = charged === '-' || charged === String(USAGE);
      rows.push({
        variant,
        status: reply.statuses.join('+') || 'closed',
        keySeen: seen === undefined ? 'not forwarded' : String(seen['x-api-key'] ?? 'MISSING'),
        tenantSeen: path.startsWith('/tenant/') ? String(seen?.['x-tenant'] ?? 'MISSING') : '-',
        charged,
        verdict: seen === undefined ? 'refused' : keyOk && tenantOk && costOk ? 'same headers' : 'HIDDEN',
      });
    }
    const table = [
      'variant                       | status | upstream saw x-api-key | x-tenant | charged | verdict',
      ...rows.map(
        (r) =>
          `${r.variant.padEnd(29)} | ${r.status.padEnd(6)} | ${r.keySeen.padEnd(22)} | ${r.tenantSeen.padEnd(8)} | ${r.charged.padEnd(7)} | ${r.verdict}`,
      ),
    ].join('\n');
    console.log(`\n${table}\n`);
    t.diagnostic(`${rows.filter((r) => r.verdict === 'HIDDEN').length} of ${rows.length} variants hid a header the rules read`);
    assert.deepEqual(
      rows.filter((r) => r.verdict !== 'same headers').map((r) => r.variant),
      [],
      'these variants made the upstream see other headers than the gateway counted',
    );
  });
});
