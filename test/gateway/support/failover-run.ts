// One failover under load: two `floodgate serve` processes (insurance, fail-closed) under paced load while a test fails a master.
import assert from 'node:assert/strict';
import { get } from '../../http/support/http.js';
import { decider, figures, printFigures, startLoad, type FailoverFacts, type Figures } from './failover-load.js';
import { parseMetrics, serveCli, sleep, stopCli, type CliProcess } from './harness.js';

/** The gateways' limit: 20 per minute per API key, a window longer than the run so each key's admissions are in one. */
export const LIMIT = 20;
/** The store's timeout (the gateway's default) and the margin a loaded 2-core machine is given on top of it. */
export const STORE_TIMEOUT_MS = 500;
export const MARGIN_MS = 1500;
/** Keys per gateway, clients per gateway, and the pause after each answer: about 2.3 requests per key per second. */
const KEYS = 40;
const CLIENTS = 4;
const INTERVAL_MS = 40;
/** The failure comes this long into the run (keys are at about half their limit), and the run lasts at least this long. */
const FAIL_AFTER_MS = 5000;
const RUN_MS = 13_000;
/** And at least this long after the promotion, so the time back on the store is seen. */
const AFTER_PROMOTION_MS = 5000;

/** What the scenario's `fail` did: when, the promotion, the API keys that were on the failed master, and their counts on its replica. */
export type Failure = Omit<FailoverFacts, 'limit' | 'boundMs'>;

/** The result: the facts and one row of figures per gateway (insurance first, then fail-closed). */
export interface FailoverRun {
  facts: FailoverFacts;
  rows: Figures[];
  /** Each gateway's store calls that failed (floodgate_store_duration_seconds_count{result="error"}). */
  storeErrors: number[];
}

/**
 * Starts a gateway with the default `onFailure: insurance` and one with `fail-closed` on the store of `storeArgs`, loads
 * each with 4 clients over 40 API keys of its own (`<prefix>-ins-N`, `<prefix>-fc-N`), calls `fail` 5 s in, keeps the load
 * on until 13 s and 5 s past the promotion, prints the figures and checks that both gateways still run and reported
 * no unhandled rejection.
 */
export async function failoverUnderLoad(options: {
  title: string;
  upstream: string;
  storeArgs: readonly string[];
  prefix: string;
  fail: () => Promise<Failure>;
}): Promise<FailoverRun> {
  const common = ['--upstream', options.upstream, ...options.storeArgs, '--limit', `${LIMIT}/1m`, '--key', 'header:x-api-key'];
  const gateways: CliProcess[] = [];
  try {
    const [ins, fc] = await Promise.all([serveCli(common), serveCli([...common, '--on-store-failure', 'fail-closed'])]);
    gateways.push(ins, fc);
    const keys = (kind: string): string[] => Array.from({ length: KEYS }, (_, i) => `${options.prefix}-${kind}-${i}`);
    const started = Date.now();
    const load = startLoad(
      [
        { label: 'insurance (default)', url: ins.url, keys: keys('ins'), clients: CLIENTS },
        { label: 'fail-closed', url: fc.url, keys: keys('fc'), clients: CLIENTS },
      ],
      { intervalMs: INTERVAL_MS },
    );
    let failure: Failure;
    try {
      await sleep(FAIL_AFTER_MS);
      failure = await options.fail();
      await sleep(Math.max(started + RUN_MS, failure.promotedAt + AFTER_PROMOTION_MS) - Date.now());
    } finally {
      await load.stop();
    }
    const facts: FailoverFacts = { ...failure, limit: LIMIT, boundMs: STORE_TIMEOUT_MS + MARGIN_MS };
    const rows = (['insurance (default)', 'fail-closed'] as const).map((label, i) => {
      const own = load.samples.filter((s) => s.gateway === label);
      return figures(own, decider(own, i === 0 ? 'insurance' : 'fail-closed', failure.failedAt), facts);
    });
    printFigures(options.title, facts, rows);
    // FAILOVER_DUMP=PATH keeps every sample (PATH-<prefix>.json) for a closer look at a run.
    if (process.env.FAILOVER_DUMP !== undefined) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(
        `${process.env.FAILOVER_DUMP}-${options.prefix}.json`,
        JSON.stringify({ facts: { ...facts, moved: [...facts.moved] }, samples: load.samples }),
      );
    }
    const storeErrors: number[] = [];
    for (const g of gateways) {
      assert.equal(g.child.exitCode, null, `the gateway kept running; stderr: ${g.stderr()}`);
      if (g.stderr() !== '') console.log(`gateway stderr:\n${g.stderr()}`);
      assert.doesNotMatch(g.stderr(), /unhandled|uncaught/i, 'no unhandled rejection or uncaught exception');
      const metrics = parseMetrics((await get(`${(g as CliProcess & { url: string }).url}/_floodgate/metrics`)).body);
      storeErrors.push(metrics.get('floodgate_store_duration_seconds_count{store="redis",result="error"}') ?? 0);
    }
    console.log(`store calls failed (floodgate_store_duration_seconds_count{result="error"}): ${storeErrors.join(' / ')}`);
    return { facts, rows, storeErrors };
  } finally {
    await Promise.all(gateways.map((g) => stopCli(g)));
  }
}

/** The guarantees every failover keeps, asserted for each gateway's figures. */
export function assertGuarantees(run: FailoverRun, backWithinMs: number): void {
  for (const f of run.rows) {
    const unanswered = Object.entries(f.statuses).filter(([status]) => status !== '200' && status !== '429');
    assert.deepEqual(unanswered, [], `${f.gateway}: every request answered 200 or 429`);
    assert.equal(f.slow, 0, `${f.gateway}: no answer slower than the store timeout + ${MARGIN_MS} ms (max ${f.maxMs} ms)`);
    assert.ok(f.backOnStoreMs !== undefined, `${f.gateway}: a moved key was admitted by the store again`);
    assert.ok(f.backOnStoreMs <= backWithinMs, `${f.gateway}: back on the store ${f.backOnStoreMs} ms after the promotion`);
    assert.equal(f.outageStoreAdmitted, 0, `${f.gateway}: no admission on a moved key is read as the store's while no master holds it`);
    assert.ok(f.worstUnexplained <= 0, `${f.gateway}: over-admission beyond replica lag + fallback admissions (${f.worstUnexplained})`);
  }
}
