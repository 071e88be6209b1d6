// Paced load for the failover tests: records each request's status, latency and what decided it, and the failover figures.
import { Agent, request } from 'node:http';

/** One request as the load saw it. Times are epoch ms. */
export interface Sample {
  /** The gateway's label. */
  gateway: string;
  key: string;
  start: number;
  end: number;
  /** 0 when no answer came (socket error, or nothing within the client's timeout). */
  status: number;
  error?: string;
  /** The RateLimit field's `r` and `t` (seconds), when sent. */
  remaining?: number;
  resetS?: number;
  /** The problem type's fragment (`quota-exceeded`, `temporary-reduced-capacity`) of a problem+json answer. */
  problem?: string;
}

/** A gateway to load: `clients` clients share `keys`, each sending one request every `intervalMs` or so. */
export interface LoadTarget {
  label: string;
  url: string;
  keys: readonly string[];
  clients: number;
}

/** The running load. */
export interface Load {
  /** Every sample so far. */
  readonly samples: Sample[];
  /** Stops the clients after their requests in flight; resolves with every sample. */
  stop(): Promise<Sample[]>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One GET of `url` with header `x-api-key: key` on `agent`, recorded whatever happens (the client gives up after `timeoutMs`). */
function one(agent: Agent, gateway: string, url: string, key: string, timeoutMs: number): Promise<Sample> {
  const start = Date.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (s: Omit<Sample, 'gateway' | 'key' | 'start' | 'end'>): void => {
      if (done) return;
      done = true;
      resolve({ gateway, key, start, end: Date.now(), ...s });
    };
    const req = request(`${url}/x`, { agent, headers: { 'x-api-key': key } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => finish({ status: 0, error: e.message }));
      res.on('end', () => {
        const field = /;r=(\d+);t=(\d+)/.exec(String(res.headers.ratelimit ?? ''));
        const body = Buffer.concat(chunks).toString('utf8');
        const problem = String(res.headers['content-type']).includes('problem+json') ? /#([a-z-]+)"/.exec(body)?.[1] : undefined;
        finish({
          status: res.statusCode ?? 0,
          ...(field === null ? {} : { remaining: Number(field[1]), resetS: Number(field[2]) }),
          ...(problem === undefined ? {} : { problem }),
        });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e) => finish({ status: 0, error: e.message }));
    req.end();
  });
}

/**
 * Starts the clients: client `i` of a target sends its keys (every `clients`-th) in turn, one request at a time on a
 * keep-alive connection, pausing `intervalMs` after each answer. So each key's requests go one after another, at a rate
 * the machine's load does not change much, and a key reaches its limit at a time the test can plan for.
 */
export function startLoad(targets: readonly LoadTarget[], options: { intervalMs: number; timeoutMs?: number }): Load {
  const samples: Sample[] = [];
  let running = true;
  const loops: Promise<void>[] = [];
  const agents: Agent[] = [];
  for (const t of targets) {
    for (let c = 0; c < t.clients; c++) {
      const keys = t.keys.filter((_, i) => i % t.clients === c);
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      agents.push(agent);
      loops.push(
        (async () => {
          // Spread the clients' first requests over one interval, so they do not all arrive at once.
          await sleep((options.intervalMs * c) / t.clients);
          for (let i = 0; running; i++) {
            samples.push(await one(agent, t.label, t.url, keys[i % keys.length]!, options.timeoutMs ?? 5000));
            await sleep(options.intervalMs);
          }
        })(),
      );
    }
  }
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
      for (const a of agents) a.destroy();
      return samples;
    },
  };
}

/** What decided a request: the store (or the in-memory block of what the store said), the fallback, or nothing (no answer, 5xx). */
export type Decider = 'store' | 'fallback' | 'none';

/**
 * Tells the fallback's answers from the store's. `fail-closed`'s refusal has its own problem type. The insurance limiter
 * has windows of its own that open at its first use, after `since` (the failure), while the store's window of a key
 * opened at the key's first request: an answer whose window ends (`end` + `t`) 2 s or more past the latest end the
 * key's answers before `since` gave is the insurance's. Keys must be first used a few seconds before `since`.
 */
export function decider(samples: readonly Sample[], fallback: 'insurance' | 'fail-closed', since: number): (s: Sample) => Decider {
  const storeEnd = new Map<string, number>();
  for (const s of samples) {
    if (s.end >= since || s.resetS === undefined || (s.status !== 200 && s.status !== 429)) continue;
    const end = s.end + s.resetS * 1000;
    storeEnd.set(s.key, Math.min(storeEnd.get(s.key) ?? Infinity, end));
  }
  return (s) => {
    if (s.status !== 200 && s.status !== 429) return 'none';
    if (fallback === 'fail-closed') return s.problem === 'temporary-reduced-capacity' ? 'fallback' : 'store';
    const known = storeEnd.get(s.key);
    if (known === undefined || s.resetS === undefined) return 'store';
    return s.end + s.resetS * 1000 >= known + 2000 ? 'fallback' : 'store';
  };
}

/** The figures of one gateway through one failover. Times in ms; `at` times are from the failure (kill or CLUSTER FAILOVER). */
export interface Figures {
  gateway: string;
  requests: number;
  statuses: Record<number, number>;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers slower than the bound the test asserts. */
  slow: number;
  /** Decided by the fallback: all, admissions, and the first and last answer's time from the failure. */
  fallback: number;
  fallbackAdmitted: number;
  firstFallbackAt: number | undefined;
  lastFallbackAt: number | undefined;
  /** Fallback answers on keys whose master stayed up (the breaker is the rule's, not the node's). */
  collateral: number;
  /** Answers on moved keys sent after the failure and answered before the promotion, and how many the fallback gave. */
  outage: number;
  outageFallback: number;
  /** Of those, admissions the store is said to have decided: none can be (no master), so above 0 means a misread. */
  outageStoreAdmitted: number;
  /** From the promotion to the end of the first request on a moved key admitted by the store again. */
  backOnStoreMs: number | undefined;
  /** Keys admitted past the limit, the most past it, and the sum. */
  keysOver: number;
  maxOver: number;
  sumOver: number;
  /** Per key, admitted − limit − (lost + fallback admissions): above 0 is over-admission the bound does not explain. */
  worstUnexplained: number;
  /** Admissions on a moved key the old master counted and its replica had not received (Σ over keys). */
  lost: number;
}

/** The failover's times and what the test read from the servers. */
export interface FailoverFacts {
  /** When the master was killed (or CLUSTER FAILOVER sent). */
  failedAt: number;
  /** When the replica first answered ROLE as a master. */
  promotedAt: number;
  /** The API keys whose counters were on the failed master. */
  moved: ReadonlySet<string>;
  /** Per moved key, its count on the replica right after the kill (before its promotion); absent for a planned failover. */
  replicaCount?: ReadonlyMap<string, number>;
  limit: number;
  /** The master's replication offset minus its replica's, read just before the failure (bytes not yet sent or acknowledged). */
  lagBytes?: number;
  /** Other times worth printing under the title. */
  notes?: readonly string[];
  /** The latency bound asserted: store timeout + margin. */
  boundMs: number;
}

/** Computes {@link Figures} for the samples of one gateway. */
export function figures(samples: readonly Sample[], decide: (s: Sample) => Decider, facts: FailoverFacts): Figures {
  const latencies = samples.map((s) => s.end - s.start).sort((a, b) => a - b);
  const pct = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  const statuses: Record<number, number> = {};
  const admitted = new Map<string, number>();
  const fallbackAdmitted = new Map<string, number>();
  const storeBefore = new Map<string, number>();
  let fallback = 0;
  let firstFallbackAt: number | undefined;
  let lastFallbackAt: number | undefined;
  let back: number | undefined;
  let collateral = 0;
  let outage = 0;
  let outageFallback = 0;
  let outageStoreAdmitted = 0;
  for (const s of samples) {
    statuses[s.status] = (statuses[s.status] ?? 0) + 1;
    const d = decide(s);
    if (s.status === 200) admitted.set(s.key, (admitted.get(s.key) ?? 0) + 1);
    if (facts.moved.has(s.key) && s.start >= facts.failedAt && s.end < facts.promotedAt) {
      outage++;
      if (d === 'fallback') outageFallback++;
      if (d === 'store' && s.status === 200) outageStoreAdmitted++;
    }
    if (d === 'fallback') {
      fallback++;
      if (!facts.moved.has(s.key)) collateral++;
      const at = s.end - facts.failedAt;
      firstFallbackAt = Math.min(firstFallbackAt ?? Infinity, at);
      lastFallbackAt = Math.max(lastFallbackAt ?? -Infinity, at);
      if (s.status === 200) fallbackAdmitted.set(s.key, (fallbackAdmitted.get(s.key) ?? 0) + 1);
    }
    if (d === 'store' && s.status === 200 && s.start < facts.failedAt) storeBefore.set(s.key, (storeBefore.get(s.key) ?? 0) + 1);
    if (d === 'store' && s.status === 200 && facts.moved.has(s.key) && s.start >= facts.failedAt && s.end >= facts.promotedAt) {
      back = Math.min(back ?? Infinity, s.end - facts.promotedAt);
    }
  }
  let keysOver = 0;
  let maxOver = 0;
  let sumOver = 0;
  let lost = 0;
  let worstUnexplained = -Infinity;
  for (const [key, n] of admitted) {
    const over = n - facts.limit;
    if (over > 0) {
      keysOver++;
      sumOver += over;
      maxOver = Math.max(maxOver, over);
    }
    const counted = facts.replicaCount?.get(key);
    const keyLost = facts.moved.has(key) && counted !== undefined ? Math.max(0, (storeBefore.get(key) ?? 0) - counted) : 0;
    lost += keyLost;
    worstUnexplained = Math.max(worstUnexplained, over - keyLost - (fallbackAdmitted.get(key) ?? 0));
  }
  return {
    gateway: samples[0]?.gateway ?? '',
    requests: samples.length,
    statuses,
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    maxMs: latencies[latencies.length - 1] ?? 0,
    slow: latencies.filter((l) => l > facts.boundMs).length,
    fallback,
    fallbackAdmitted: [...fallbackAdmitted.values()].reduce((a, b) => a + b, 0),
    firstFallbackAt,
    lastFallbackAt,
    collateral,
    outage,
    outageFallback,
    outageStoreAdmitted,
    backOnStoreMs: back,
    keysOver,
    maxOver,
    sumOver,
    worstUnexplained,
    lost,
  };
}

/** Prints the scenario's figures as a table, one column per gateway. */
export function printFigures(title: string, facts: FailoverFacts, rows: readonly Figures[]): void {
  const ms = (v: number | undefined): string => (v === undefined ? '-' : `${Math.round(v)}`);
  const lines: Array<[string, (f: Figures) => string]> = [
    ['requests', (f) => String(f.requests)],
    [
      'statuses',
      (f) =>
        Object.entries(f.statuses)
          .map(([k, v]) => `${k}:${v}`)
          .join(' '),
    ],
    ['latency p50 / p99 / max ms', (f) => `${f.p50Ms} / ${f.p99Ms} / ${f.maxMs}`],
    [`answers slower than ${facts.boundMs} ms`, (f) => String(f.slow)],
    ['decided by the fallback (admitted)', (f) => `${f.fallback} (${f.fallbackAdmitted})`],
    ['fallback answers from .. to, ms after failure', (f) => `${ms(f.firstFallbackAt)} .. ${ms(f.lastFallbackAt)}`],
    ['moved keys, failure .. promotion: answers (fallback)', (f) => `${f.outage} (${f.outageFallback})`],
    ['fallback answers on keys whose master stayed up', (f) => String(f.collateral)],
    ['N: promotion -> first store admission on a moved key, ms', (f) => ms(f.backOnStoreMs)],
    ['keys over the limit / max over / sum over', (f) => `${f.keysOver} / ${f.maxOver} / ${f.sumOver}`],
    ['lost to replica lag (admitted - replica count, moved keys)', (f) => (facts.replicaCount === undefined ? 'n/a' : String(f.lost))],
    ['worst key: over - (lost + fallback admissions)', (f) => String(f.worstUnexplained)],
  ];
  const width = Math.max(...lines.map(([l]) => l.length));
  const out = [
    `\n${title}: promoted ${facts.promotedAt - facts.failedAt} ms after the failure; ${facts.moved.size} keys moved; ` +
      `replica behind by ${facts.lagBytes ?? '-'} bytes just before; limit ${facts.limit}`,
    ...(facts.notes ?? []),
    `${''.padEnd(width)} | ${rows.map((f) => f.gateway.padEnd(22)).join(' | ')}`,
    ...lines.map(([label, get]) => `${label.padEnd(width)} | ${rows.map((f) => get(f).padEnd(22)).join(' | ')}`),
  ];
  console.log(out.join('\n'));
}
