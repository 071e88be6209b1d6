/** Sends one fixed request sequence to envoyproxy/ratelimit and to floodgate's RLS server, each in turn on the same (flushed) Redis, and prints every decision that differs: `npx tsx bench/rls/compare.ts`. */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis } from '../../test/support/redis-server.js';
import { BenchError } from '../lib/errors.js';
import { connectRls, type RlsAnswer } from './client.js';
import { startFloodgateRls } from './floodgate.js';
import { assertBuilt, REFERENCE_EXAMPLES } from './paths.js';
import { startReference } from './reference.js';
import { EXAMPLE_SEQUENCE, type Step } from './sequence.js';
import { formatAnswer, sameAnswer } from './answers.js';

const USAGE = `usage: npx tsx bench/rls/compare.ts [options]

options:
  --only S          run one side only and print its answers: "reference" or "floodgate"
  --config DIR      envoyproxy/ratelimit config directory (default: its examples/ratelimit/config,
                    from the source bench/rls/build-reference.sh built); the sequence is
                    written for those examples
  --floodgate-arg A one more flag for floodgate serve (repeatable), e.g. --floodgate-arg=--local-first
  --floodgate-bin F the floodgate entry to run (default: this checkout's bin/floodgate.mjs,
                    which needs \`npm run build\`); another checkout's, to check a branch
  --json            print the recorded answers of both sides as JSON on stdout
  --help            this text

exit code: 0 when every answer matches (or --only ran), 1 on a difference, 2 on bad usage`;

type Side = 'reference' | 'floodgate';

/** What one side answered: answers[step][repetition]. */
type Recording = RlsAnswer[][];

const log = (message: string): void => void process.stderr.write(`${message}\n`);

/** Attempts per side when a run crosses a second boundary. */
const MAX_ATTEMPTS = 3;

/**
 * envoyproxy/ratelimit counts in windows aligned to the clock (now truncated
 * to the unit). Each side waits for the next second boundary, and for the
 * next minute when fewer than 15 s of this one are left, then sends the
 * sequence: its per-second steps first (a dozen calls, well under a
 * second), then the per-minute ones. A run whose per-second steps did not
 * all fall in one second, or whose calls did not all fall in one minute (a
 * slow machine), is thrown away and redone on a flushed Redis with a fresh
 * server.
 */
async function alignToWindow(): Promise<void> {
  const now = Date.now();
  let target = Math.ceil((now + 1) / 1000) * 1000;
  if (target % 60_000 > 45_000) target = Math.ceil(target / 60_000) * 60_000;
  await new Promise((resolve) => setTimeout(resolve, target - now + 2));
}

/** How to start floodgate's side. */
interface FloodgateCommand {
  readonly args: readonly string[];
  readonly bin: string | undefined;
}

async function runSide(
  side: Side,
  config: string,
  redisUrl: string,
  flush: () => Promise<void>,
  floodgate: FloodgateCommand,
): Promise<Recording> {
  for (let attempt = 1; ; attempt++) {
    await flush();
    log(`[${side}] starting (attempt ${attempt})`);
    const server =
      side === 'reference'
        ? await startReference({ config, redisUrl })
        : await startFloodgateRls({
            config,
            redisUrl,
            args: floodgate.args,
            ...(floodgate.bin === undefined ? {} : { bin: floodgate.bin }),
          });
    const client = await connectRls(server.port);
    try {
      await client.ready();
      await alignToWindow();
      const started = Date.now();
      // The per-second steps lead the sequence; when the last of them is answered, they must all have been in one second.
      let perSecondEnded = started;
      const recording: Recording = [];
      for (const step of EXAMPLE_SEQUENCE) {
        const answers: RlsAnswer[] = [];
        for (let i = 0; i < step.times; i++) answers.push(await client.shouldRateLimit(step.request));
        recording.push(answers);
        if (step.perSecond === true) perSecondEnded = Date.now();
      }
      const ended = Date.now();
      log(`[${side}] ${EXAMPLE_SEQUENCE.reduce((n, s) => n + s.times, 0)} calls in ${ended - started} ms`);
      const sameSecond = Math.floor(started / 1000) === Math.floor(perSecondEnded / 1000);
      const sameMinute = Math.floor(started / 60_000) === Math.floor(ended / 60_000);
      if (sameSecond && sameMinute) return recording;
      const what = sameSecond ? 'the sequence crossed a minute boundary' : 'the per-second steps crossed a second boundary';
      if (attempt >= MAX_ATTEMPTS) throw new BenchError(`[${side}] ${what} ${attempt} times; the machine is too busy`);
      log(`[${side}] ${what}; again`);
    } finally {
      client.close();
      await server.stop();
    }
  }
}

function printRecording(side: Side, steps: readonly Step[], recording: Recording): void {
  const lines = [`${side}:`];
  steps.forEach((step, i) => {
    recording[i]!.forEach((answer, rep) => lines.push(`  ${i + 1}.${rep + 1} ${step.label}: ${formatAnswer(answer)}`));
  });
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Lines for every answer that differs, with the step it came from. */
function diff(steps: readonly Step[], reference: Recording, floodgate: Recording): string[] {
  const lines: string[] = [];
  steps.forEach((step, i) => {
    reference[i]!.forEach((expected, rep) => {
      const actual = floodgate[i]![rep]!;
      if (!sameAnswer(expected, actual)) {
        if (step.allOrNothing === true && sameAnswer(expected, actual, true)) {
          process.stdout.write(`${i + 1}.${rep + 1} ${step.label}: differs as documented (all or nothing): ${formatAnswer(actual)}\n`);
          return;
        }
        lines.push(
          `${i + 1}.${rep + 1} ${step.label}`,
          `    reference: ${formatAnswer(expected)}`,
          `    floodgate: ${formatAnswer(actual)}`,
        );
      }
    });
  });
  return lines;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      config: { type: 'string' },
      'floodgate-arg': { type: 'string', multiple: true },
      'floodgate-bin': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.only !== undefined && values.only !== 'reference' && values.only !== 'floodgate') {
    log(`--only takes "reference" or "floodgate"; got ${JSON.stringify(values.only)}\n\n${USAGE}`);
    return 2;
  }
  const sides: Side[] = values.only === undefined ? ['reference', 'floodgate'] : [values.only];
  const config = values.config ?? assertBuilt(REFERENCE_EXAMPLES, "envoyproxy/ratelimit's example configurations");
  const redis = await startRedis();
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  try {
    const recordings = new Map<Side, Recording>();
    for (const side of sides) {
      recordings.set(
        side,
        await runSide(side, config, redis.url, () => admin.flushall().then(() => undefined), {
          args: values['floodgate-arg'] ?? [],
          bin: values['floodgate-bin'],
        }),
      );
    }
    if (values.json) {
      const out = EXAMPLE_SEQUENCE.map((step, i) => ({
        label: step.label,
        request: step.request,
        ...Object.fromEntries(sides.map((side) => [side, recordings.get(side)![i]])),
      }));
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    }
    if (sides.length === 1) {
      if (!values.json) printRecording(sides[0]!, EXAMPLE_SEQUENCE, recordings.get(sides[0]!)!);
      return 0;
    }
    const lines = diff(EXAMPLE_SEQUENCE, recordings.get('reference')!, recordings.get('floodgate')!);
    const total = EXAMPLE_SEQUENCE.reduce((n, s) => n + s.times, 0);
    if (lines.length === 0) {
      log(`same decisions: all ${total} answers match`);
      return 0;
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    log(`${lines.length / 3} of ${total} answers differ`);
    return 1;
  } finally {
    admin.disconnect();
    await redis.stop();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    log(error instanceof BenchError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exitCode = 1;
  },
);
