// Outbound limits across processes: 4 processes × 50 callers through outboundFetch on one real Redis, against floodgate serve
// limiting its app to 100 per window and saying so in RateLimit headers. After the first window the upstream refuses nothing,
// and the callers use at least 95 % of its limit.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { nextMessage } from '../support/child-messages.js';
import { listen, close } from '../http/support/http.js';
import { startGateway } from '../gateway/support/harness.js';
import { parseConfigText } from '../../src/gateway/config/config-file.js';
import type { CallerReport } from '../support/egress-caller.js';

const CHILD = fileURLToPath(new URL('../support/egress-caller.ts', import.meta.url));
const PROCESSES = 4;
const CALLERS = 50;
const LIMIT = 100;
// The issue's own setting, 100 per 10 s. Shorter windows make the time spent on timers and round trips at each window's
// edge a larger share of it: at 4 s a loaded machine measured 94.4 % where an idle one measured 97.3 %.
const WINDOW_MS = Number(process.env.FLOODGATE_EGRESS_WINDOW_MS ?? 10_000);
/** The learning window and three measured after it. */
const WINDOWS = 4;

let redis: RedisServer;
let app: Server;
let appUrl: string;
before(async () => {
  redis = await startRedis();
  app = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  appUrl = await listen(app);
});
after(async () => {
  await close(app);
  await redis.stop();
});

/** The upstream: floodgate serve limiting the app to `limit` per window for everyone, saying so in RateLimit headers. */
const upstreamYaml = (limit: number): string =>
  `upstream: ${appUrl}\nrules:\n  - { name: api, key: global, policies: ["${limit}/${WINDOW_MS}ms"] }\n`;

/**
 * The admitted rate after learning as a share of the upstream's limit: the answers come in one burst per window (200
 * callers wait for each), so the rate is the admitted answers of every burst but the last over the time from the first
 * burst's start to the last's, against `limit` per window. Partial windows at the run's ends count for nothing.
 */
function throughput(answers: readonly { at: number; status: number }[], limit: number): { share: number; windows: number } {
  const ok = answers.filter((a) => a.status === 200);
  const starts: number[] = [];
  let inLast = 0;
  ok.forEach((a, i) => {
    if (i === 0 || a.at - ok[i - 1]!.at > WINDOW_MS / 2) {
      starts.push(a.at);
      inLast = 0;
    }
    inLast++;
  });
  if (starts.length < 2) return { share: 0, windows: starts.length };
  const elapsed = starts[starts.length - 1]! - starts[0]!;
  return { share: (ok.length - inLast) / ((elapsed / WINDOW_MS) * limit), windows: starts.length - 1 };
}

/** Runs the callers of every process for `windows` windows against `url`; `prefix` keeps runs apart in Redis. */
async function runCallers(url: string, prefix: string, windows: number): Promise<CallerReport[]> {
  const forked: ChildProcess[] = [];
  // A ceiling above the upstream's limit: the limit is learnt from its answers.
  const args = [
    redis.url,
    url,
    String(LIMIT * 2),
    String(WINDOW_MS),
    String(CALLERS),
    String(WINDOW_MS * windows),
    String(WINDOW_MS * 4),
    prefix,
  ];
  for (let i = 0; i < PROCESSES; i++)
    forked.push(fork(CHILD, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  await Promise.all(forked.map((child) => nextMessage(child, 'ready')));
  const reports = forked.map((child) => nextMessage<CallerReport>(child, 'report'));
  for (const child of forked) child.send({ type: 'go' });
  return Promise.all(reports);
}

test(`${PROCESSES} processes × ${CALLERS} callers on one Redis: no refusal from the upstream after the first window, ≥ 95 % of its limit used`, async (t) => {
  const gateway = await startGateway(upstreamYaml(LIMIT));
  t.after(() => gateway.shutdown());
  const all = await runCallers(gateway.url, 'steady', WINDOWS);
  const answers = all.flatMap((r) => r.answers).sort((a, b) => a.at - b.at);
  const outcomes = all.flatMap((r) => r.outcomes);
  const first = answers[0]!.at;
  const learning = answers.filter((a) => a.at < first + WINDOW_MS);
  const after = answers.filter((a) => a.at >= first + WINDOW_MS);
  const refusedAfter = after.filter((a) => a.status !== 200).length;
  const okAfter = after.filter((a) => a.status === 200).length;
  const { share, windows: windowsAfter } = throughput(after, LIMIT);
  const codes = new Map<string, number>();
  for (const o of outcomes) {
    const k = o.code ?? String(o.status);
    codes.set(k, (codes.get(k) ?? 0) + 1);
  }
  t.diagnostic(
    `first window (learning): ${learning.filter((a) => a.status === 200).length} admitted, ${learning.filter((a) => a.status !== 200).length} refused; ` +
      `after it: ${okAfter} admitted in ${windowsAfter} windows (${(share * 100).toFixed(1)} % of the limit), ${refusedAfter} refused; ` +
      `calls: ${[...codes].map(([k, n]) => `${k} ${n}`).join(', ')}`,
  );
  assert.equal(refusedAfter, 0);
  assert.ok(share >= 0.95, `used ${(share * 100).toFixed(1)} % of the limit`);
  // Every call ended: completed, or rejected with a typed error.
  for (const o of outcomes) assert.ok(o.status !== undefined || (o.code ?? '').startsWith('FLOODGATE_'), `a call ended with ${o.code}`);
});

test(`the upstream halves its limit mid-run, saying so only in its headers: the callers follow within one window`, async (t) => {
  const gateway = await startGateway(upstreamYaml(LIMIT));
  t.after(() => gateway.shutdown());
  let changedAt = 0;
  const halve = setTimeout(() => {
    void parseConfigText(upstreamYaml(LIMIT / 2), 'test.yaml', { listen: { host: '127.0.0.1', port: 0 }, watch: false }).then((next) => {
      gateway.apply(next);
      changedAt = Date.now();
    });
  }, WINDOW_MS * 2);
  t.after(() => clearTimeout(halve));
  const all = await runCallers(gateway.url, 'halving', 5);
  const answers = all.flatMap((r) => r.answers).sort((a, b) => a.at - b.at);
  assert.ok(changedAt > 0, 'the limit was changed during the run');
  const firstWindow = answers.filter((a) => a.at >= changedAt && a.at < changedAt + WINDOW_MS);
  const later = answers.filter((a) => a.at >= changedAt + WINDOW_MS);
  const refusedFirst = firstWindow.filter((a) => a.status !== 200).length;
  const refusedLater = later.filter((a) => a.status !== 200).length;
  const okLater = later.filter((a) => a.status === 200).length;
  const { share: shareLater, windows: windowsLater } = throughput(later, LIMIT / 2);
  t.diagnostic(
    `after the halving: ${refusedFirst} refusals in its first window, then ${refusedLater} in ${windowsLater} windows, ` +
      `${okLater} admitted (${(shareLater * 100).toFixed(1)} % of the new limit)`,
  );
  assert.equal(refusedLater, 0, 'no refusal after the first window of the new limit');
  assert.ok(refusedFirst <= LIMIT / 2, `a 429 storm: ${refusedFirst} refusals`);
});
