// The key-flood check shared by the memory and --workers tests: live counts before, a flood of distinct API keys through the decision endpoint (pipelined), exact counts and RSS after.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { MAX_PIPELINED } from '../../../src/gateway/serve/listeners.js';
import { connect } from 'node:net';
import type { CliProcess } from './harness.js';

/** Distinct keys in the acceptance flood; FLOODGATE_FLOOD_KEYS overrides it for a quick local run. */
export const FLOOD_KEYS = Number(process.env.FLOODGATE_FLOOD_KEYS ?? 1_000_000);
/** Keys of the one rule's table: small, so the flood fills it a hundred times over. */
const MAX_KEYS = 10_000;
const CONNECTIONS = 16;
/**
 * Requests written at once on each connection (HTTP/1.1 pipelining): the
 * client must not be what is measured. The gateway cuts a connection with
 * more unanswered requests than MAX_PIPELINED, so no more than that.
 */
const BATCH = MAX_PIPELINED;

/** Two rules: a per-address login rule and a per-key tenant rule, on tables of MAX_KEYS keys. */
export const CONFIG = `
trustProxy: [loopback]
store: { maxKeys: ${MAX_KEYS}, overflowCells: 16384 }
rules:
  - name: login
    match: { path: /login }
    key: ip
    policies: ["3/1h"]
  - name: tenant
    match: { path: /api/ }
    key: header:x-api-key
    policies: ["5/1h"]
`;

function decideRequest(uri: string, key: string | undefined, ip = '10.9.9.9'): string {
  return `GET /_floodgate/decide HTTP/1.1\r\nHost: gw\r\nX-Original-URI: ${uri}\r\nX-Forwarded-For: ${ip}\r\n${key === undefined ? '' : `X-API-Key: ${key}\r\n`}\r\n`;
}

/**
 * Sends `requests` over `connections` keep-alive connections, `BATCH` at a
 * time per connection, and counts the answers by status.
 */
async function pipelined(url: string, connections: number, requests: (i: number) => string, total: number): Promise<Map<number, number>> {
  const { hostname, port } = new URL(url);
  const counts = new Map<number, number>();
  let next = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      socket.setEncoding('latin1');
      let pending = 0;
      let buffer = '';
      const send = (): void => {
        if (next >= total) {
          socket.end();
          resolve();
          return;
        }
        let text = '';
        for (let n = 0; n < BATCH && next < total; n++, next++) text += requests(next);
        pending = text.split('\r\n\r\n').length - 1;
        socket.write(text);
      };
      socket.on('connect', send);
      socket.on('data', (d: string) => {
        buffer += d;
        let at = 0;
        for (;;) {
          const head = buffer.indexOf('\r\n\r\n', at);
          if (head < 0) break;
          const length = /\r\ncontent-length: *(\d+)/i.exec(buffer.slice(at, head));
          const next = head + 4 + (length ? Number(length[1]) : 0);
          if (buffer.length < next) break;
          const status = Number(buffer.slice(at + 9, at + 12));
          counts.set(status, (counts.get(status) ?? 0) + 1);
          pending--;
          at = next;
        }
        buffer = buffer.slice(at);
        if (pending === 0) send();
      });
      socket.on('error', reject);
    });
  await Promise.all(Array.from({ length: connections }, one));
  return counts;
}

/** Resident memory of `pid` and its descendants, in MB. */
function rssMb(pid: number): number {
  let kb = 0;
  const walk = (p: number): void => {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      for (const task of readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) walk(Number(task));
    } catch {
      // A process that just exited has nothing left to count.
    }
  };
  walk(pid);
  return kb / 1024;
}

/** Samples the RSS of `pid`'s process tree every 100 ms until `stop`, which returns the highest reading, in MB. */
function peakRss(pid: number): { stop: () => number } {
  let peak = rssMb(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(peak, rssMb(pid));
    },
  };
}

/** How many admissions `key` (or the login address) has left: asks until refused. */
async function left(url: string, uri: string, key: string | undefined, ip?: string): Promise<number> {
  let admitted = 0;
  for (;;) {
    const counts = await pipelined(url, 1, () => decideRequest(uri, key, ip), 1);
    if (counts.get(204) !== 1) return admitted;
    admitted++;
  }
}

/** Spends some units of 50 tenant keys and one login address, floods FLOOD_KEYS new keys, then checks every count exactly and prints the figures. */
export async function flood(cli: CliProcess & { url: string }, variant: string): Promise<void> {
  const url = cli.url;
  // Before the flood: 50 live tenant keys with 1–4 of their 5 units spent, and one address with 2 of its 3 logins.
  // (A key never seen before the flood is not live state: while the table is full it is decided in the overflow
  // sketch, which may refuse it early.)
  const keys = Array.from({ length: 50 }, (_, i) => ({ key: `tenant-${i}`, spent: 1 + (i % 4) }));
  for (const { key, spent } of keys) await pipelined(url, 1, () => decideRequest('/api/x', key), spent);
  await pipelined(url, 1, () => decideRequest('/login', undefined, '10.1.1.1'), 2);
  const rssBefore = rssMb(cli.child.pid!);

  const started = Date.now();
  const half = Math.floor(FLOOD_KEYS / 2);
  const firstPeak = peakRss(cli.child.pid!);
  const counts = await pipelined(url, CONNECTIONS, (i) => decideRequest('/api/x', `flood-${i}`), half);
  const rssHalf = firstPeak.stop();
  const secondPeak = peakRss(cli.child.pid!);
  const rest = await pipelined(url, CONNECTIONS, (i) => decideRequest('/api/x', `flood-${half + i}`), FLOOD_KEYS - half);
  for (const [status, n] of rest) counts.set(status, (counts.get(status) ?? 0) + n);
  const seconds = (Date.now() - started) / 1000;
  const rssAfter = secondPeak.stop();
  const metrics = await fetch(`${url}/_floodgate/metrics`).then((r) => r.text());
  // Counted by the embedded memory store's tables; under --workers the table is the primary's, which has no metrics of its own.
  const overflows = /^floodgate_store_overflows (\d+)/m.exec(metrics)?.[1] ?? 'not counted';

  const remaining = await Promise.all(keys.map(({ key }) => left(url, '/api/x', key)));
  const loginLeft = await left(url, '/login', undefined, '10.1.1.1');
  console.log(
    `${variant}: ${FLOOD_KEYS} distinct keys in ${seconds.toFixed(1)} s (${Math.round(FLOOD_KEYS / seconds)} decisions/s; ${JSON.stringify(Object.fromEntries(counts))}); ` +
      `store.maxKeys ${MAX_KEYS} per rule; RSS (all processes) ${rssBefore.toFixed(0)} MB before, peak ${rssHalf.toFixed(0)} MB over the first ${half} keys, ${rssAfter.toFixed(0)} MB over the rest; overflow decisions ${overflows}; ` +
      `pre-existing keys intact: ${remaining.every((r, i) => r === 5 - keys[i]!.spent)} (50 keys), login address left ${loginLeft} of 1`,
  );
  assert.equal((counts.get(204) ?? 0) + (counts.get(429) ?? 0), FLOOD_KEYS, 'every flood request was answered 204 or 429');
  assert.deepEqual(
    remaining,
    keys.map(({ spent }) => 5 - spent),
    'every pre-existing key has exactly what it had left',
  );
  assert.equal(loginLeft, 1, 'the login address has exactly its one attempt left');
  // Bounded by the configured tables (the store's, the in-memory block's, the cluster store's caches) and the
  // sketch, not by the keys sent: they fill during the first half, so the second half's peak stays near the
  // first's, where state kept per key would raise it by as much again. Peaks, sampled through each half, because
  // one reading lands anywhere in the heaps' garbage cycle: three processes' slack swings by tens of MB.
  const first = rssHalf - rssBefore;
  const second = rssAfter - rssHalf;
  assert.ok(
    second < Math.max(20, first / 4),
    `peak RSS rose by ${second.toFixed(0)} MB over the second half of the flood, after ${first.toFixed(0)} MB over the first`,
  );
}
