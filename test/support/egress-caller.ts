// Child process of the outbound-limit test: many concurrent callers of one upstream through outboundFetch, on a shared Redis; reports every answer the upstream gave and every call's outcome.
import { Redis } from 'ioredis';
import { RedisStore } from '../../src/stores/redis/index.js';
import { OutboundLimiter, outboundFetch } from '../../src/egress/index.js';

/** One answer of the upstream (retried refusals included): when it came and its status. */
export interface Answer {
  at: number;
  status: number;
}

/** One call as its caller saw it: completed (with the final status) or rejected (with the error's code). */
export interface Outcome {
  start: number;
  end: number;
  status?: number;
  code?: string;
}

/** What a child reports when its run is over. */
export interface CallerReport {
  type: 'report';
  answers: Answer[];
  outcomes: Outcome[];
}

const [redisUrl, upstream, ceiling, windowMs, callers, runMs, timeoutMs, prefix] = process.argv.slice(2);
if (prefix === undefined)
  throw new Error('usage: egress-caller.ts <redis> <upstream url> <ceiling> <windowMs> <callers> <runMs> <timeoutMs> <prefix>');

const client = new Redis(redisUrl!);
const limiter = new OutboundLimiter({
  store: new RedisStore({ client }),
  prefix: `egress-test:${prefix}`,
  rate: { limit: Number(ceiling), window: Number(windowMs) },
});
const answers: Answer[] = [];
const outcomes: Outcome[] = [];
const fetchCounted: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  answers.push({ at: Date.now(), status: res.status });
  return res;
};
const limited = outboundFetch({ limiter, fetch: fetchCounted });

async function caller(until: number): Promise<void> {
  while (Date.now() < until) {
    const start = Date.now();
    try {
      const res = await limited(`${upstream}/work`, undefined, { timeout: Number(timeoutMs) });
      await res.arrayBuffer();
      outcomes.push({ start, end: Date.now(), status: res.status });
    } catch (error) {
      outcomes.push({ start, end: Date.now(), code: (error as { code?: string }).code ?? String(error) });
    }
  }
}

process.send!({ type: 'ready' });
process.once('message', () => {
  const until = Date.now() + Number(runMs);
  void Promise.all(Array.from({ length: Number(callers) }, () => caller(until))).then(() => {
    process.send!({ type: 'report', answers, outcomes } satisfies CallerReport, () => {
      client.disconnect();
      process.exit(0);
    });
  });
});
