// A tokens-per-window budget through the gateway in front of a real upstream that streams SSE responses ending in a usage event: over 20
// windows, the tokens of the requests admitted in a window stay within the budget plus the overshoot of the responses still in flight when
// the window's last request was admitted (each settles above its estimate only after the budget check that admitted it).
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { sleep, startGateway } from '../support/harness.js';

const BUDGET = 2000;
const WINDOW_MS = 400;
const ESTIMATE = 100;
const WINDOWS = 20;

/** One admitted request as the gateway saw it: when, in which window, and what it finally cost; steps in event order. */
interface Admission {
  admittedAt: number;
  admittedStep: number;
  settledStep: number;
  windowEnd: number;
  actual: number | undefined;
  settledAt: number | undefined;
}

/**
 * Runs `clients` clients, each sending one request at a time (SSE answers of
 * up to `maxEvents` events before the usage), for {@link WINDOWS} windows, and
 * checks each window's tokens against the bound.
 */
async function budgetRun(clients: number, maxEvents: number): Promise<void> {
  let reported = 0;
  const upstream: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const tokens = Number(url.searchParams.get('tokens'));
    let events = Number(url.searchParams.get('events'));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const next = (): void => {
      if (res.destroyed) return;
      if (events-- > 0) {
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'x' } }], usage: null })}\n\n`);
        setTimeout(next, 15);
        return;
      }
      res.write(`data: ${JSON.stringify({ choices: [], usage: { total_tokens: tokens } })}\n\n`);
      res.end('data: [DONE]\n\n');
      reported += tokens;
    };
    next();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const gw = await startGateway(`upstream: http://127.0.0.1:${(upstream.address() as AddressInfo).port}
rules:
  - name: tokens
    key: global
    policies: [{ limit: ${BUDGET}, window: ${WINDOW_MS}ms }]
    cost: { estimate: ${ESTIMATE}, json: usage.total_tokens }
`);
  // Watch the rule's charges from inside: when each request was admitted, in which window, and what it settled at.
  const admissions: Admission[] = [];
  // Milliseconds cannot order an admission and a settlement in the same millisecond: a counter can.
  let step = 0;
  const cost = (gw as unknown as { rules: RuleSet }).rules.rules[0]!.cost!;
  const byRequest = new WeakMap<IncomingMessage, Admission>();
  const charge = cost.charge.bind(cost);
  cost.charge = (limiter, info) => {
    const made = charge(limiter, info);
    if (made === undefined || info === undefined) return made;
    const now = Date.now();
    const record: Admission = {
      admittedAt: now,
      admittedStep: (step += 1),
      settledStep: Infinity,
      windowEnd: now + info.policies[0]!.resetMs,
      actual: undefined,
      settledAt: undefined,
    };
    admissions.push(record);
    const watch = made.watch.bind(made);
    made.watch = (req, res, boundMs) => {
      byRequest.set(req, record);
      return watch(req, res, boundMs);
    };
    return made;
  };
  // The rule's HttpLimiter asks for the actual cost when the response has ended, and commits it at once.
  const actual = cost.actual.bind(cost);
  cost.actual = (req, res) => {
    const reported = actual(req, res);
    const record = byRequest.get(req);
    if (record !== undefined && record.settledAt === undefined) {
      record.actual = reported ?? ESTIMATE;
      record.settledAt = Date.now();
      record.settledStep = step += 1;
    }
    return reported;
  };

  let refused = 0;
  let admitted = 0;
  const until = Date.now() + (WINDOWS + 1) * WINDOW_MS;
  const client = async (): Promise<void> => {
    while (Date.now() < until) {
      const tokens = 20 + Math.floor(Math.random() * 281);
      const events = Math.floor(Math.random() * (maxEvents + 1));
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${gw.url}/v1/chat?tokens=${tokens}&events=${events}`, { agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
      if (status === 429) {
        refused += 1;
        await sleep(5);
      } else {
        assert.equal(status, 200);
        admitted += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  for (let i = 0; i < 100 && admissions.some((a) => a.settledAt === undefined); i++) await sleep(10);
  await gw.shutdown();
  await new Promise((resolve) => upstream.close(resolve));

  assert.equal(admissions.length, admitted, 'every admitted request was charged');
  assert.ok(
    admissions.every((a) => a.settledAt !== undefined),
    'every charge settled',
  );
  assert.equal(
    admissions.reduce((sum, a) => sum + a.actual!, 0),
    reported,
    'the gateway settled exactly the tokens the upstream reported',
  );
  // Windows by their end, as the store reported it at admission (the same instant within a millisecond or two).
  const windows: Admission[][] = [];
  for (const a of [...admissions].sort((x, y) => x.windowEnd - y.windowEnd)) {
    const last = windows.at(-1);
    if (last !== undefined && a.windowEnd - last[0]!.windowEnd < WINDOW_MS / 4) last.push(a);
    else windows.push([a]);
  }
  assert.ok(windows.length >= WINDOWS, `${windows.length} windows measured`);
  const rows: string[] = [];
  let worstMargin = Infinity;
  for (const w of windows.slice(0, WINDOWS)) {
    const tokens = w.reduce((sum, a) => sum + a.actual!, 0);
    const lastAdmission = Math.max(...w.map((a) => a.admittedStep));
    const inFlight = w.filter((a) => a.settledStep > lastAdmission);
    const overshoot = inFlight.reduce((sum, a) => sum + Math.max(0, a.actual! - ESTIMATE), 0);
    const largest = Math.max(0, ...w.map((a) => a.actual! - ESTIMATE));
    const bound = BUDGET + overshoot;
    worstMargin = Math.min(worstMargin, bound - tokens);
    rows.push(
      `${String(rows.length + 1).padStart(2)}  admitted ${String(w.length).padStart(2)}  tokens ${String(tokens).padStart(4)}  bound ${bound} (= ${BUDGET} + ${overshoot} overshoot of ${inFlight.length} in flight; largest single ${largest})`,
    );
    assert.ok(tokens <= bound, `window ${rows.length}: ${tokens} tokens admitted, bound ${bound}`);
    // One request in flight at a time: the bound is the issue's, the budget plus the largest single response's overshoot.
    if (clients === 1) assert.ok(tokens <= BUDGET + largest, `window ${rows.length}: ${tokens} tokens, over ${BUDGET} + ${largest}`);
  }
  console.log(
    `token budget ${BUDGET}/${WINDOW_MS}ms, estimate ${ESTIMATE}, ${clients} client(s): ${admitted} admitted, ${refused} refused; per window (tokens ≤ budget + overshoot of the responses in flight at its last admission):\n${rows.join('\n')}\nsmallest margin under the bound: ${worstMargin} tokens`,
  );
  assert.ok(refused > 0, 'the budget was reached');
}

test(`token budget, 8 clients: ${WINDOWS} windows of ${BUDGET} tokens, SSE responses of 20–300 tokens against an estimate of ${ESTIMATE}`, () =>
  budgetRun(8, 4));

test(`token budget, one request in flight: within ${BUDGET} + the largest single response's overshoot in each of ${WINDOWS} windows`, () =>
  budgetRun(1, 0));
