/** The benchmark CLI's command line: its usage text and the parsed options. */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError } from '../lib/errors.js';
import type { RedisPlacement } from '../lib/processes.js';
import type { RunSettings } from '../lib/run-scenario.js';

/** Printed by `--help`, after a usage error, and above the scenario list. */
export const USAGE = `usage: npm run bench -- <scenario|all> [options]

options:
  --json            print one JSON array of results on stdout, nothing else
  --duration S      measured seconds per variant (default 10)
  --warmup S        unmeasured warm-up seconds per variant (default 2; 0 skips)
  --connections N   wrk connections (default: the scenario's, else 100)
  --variants a,b    run only these variants (the baseline, the first, always runs)
  --rounds N        measure every variant N times, interleaved (the order rotates
                    each round); rows show medians, ratios are the median of
                    each round's ratio to that round's baseline (default 1)
  --redis-cpu W     where redis-server runs: "server" (default, the core of the
                    system under test) or "load" (with wrk)
  --open-loop RPS[,RPS...]
                    load every variant open-loop with oha at these requests/s,
                    the same for all (in place of the scenario's shares of each
                    variant's own saturating rate): p50/p99 columns per rate
  --phases a,c      the parts of a scenario that has them (overload: a to f) to run
  --cpu-prof DIR    write V8 CPU profiles of every server process into DIR/VARIANT
                    (open it in Chrome DevTools; profiling slows the servers,
                    so read its ratios as a profile's, not a measurement's)
  --help            this text`;

/** Parsed command line: what to run (scenario, output) around the settings every scenario run follows. */
export interface Options extends RunSettings {
  /** The scenario's name, `all`, or undefined to list the scenarios. */
  readonly scenario: string | undefined;
  readonly json: boolean;
  readonly redisCpu: RedisPlacement;
  /** `--phases`: the parts of a scenario that runs itself (bench/types.ts `Scenario.run`); undefined: all. */
  readonly phases: readonly string[] | undefined;
  /** `--duration` and `--warmup` as given, undefined when left out: a scenario that runs itself has defaults of its own. */
  readonly given: { readonly duration: number | undefined; readonly warmup: number | undefined };
}

/**
 * Parses the arguments after `npm run bench --`: the options, or `'help'`
 * for `--help`. Throws {@link UsageError} for a bad value (node:util's own
 * `ERR_PARSE_ARGS_*` errors for an unknown option).
 */
export function parseOptions(argv: readonly string[]): Options | 'help' {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      variants: { type: 'string' },
      'redis-cpu': { type: 'string' },
      rounds: { type: 'string' },
      'cpu-prof': { type: 'string' },
      'open-loop': { type: 'string' },
      phases: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 1) throw new UsageError(`one scenario at a time (or "all"); got ${positionals.join(' ')}`);
  return {
    scenario: positionals[0],
    json: values.json ?? false,
    durationS: seconds(values.duration, 'duration', 10, 1),
    warmupS: seconds(values.warmup, 'warmup', 2, 0),
    connections: values.connections === undefined ? undefined : wholeNumber(values.connections, 'connections', 1),
    variants: values.variants
      ?.split(',')
      .map((v) => v.trim())
      .filter((v) => v.length > 0),
    redisCpu: placement(values['redis-cpu']),
    rounds: values.rounds === undefined ? 1 : wholeNumber(values.rounds, 'rounds', 1),
    cpuProfDir: values['cpu-prof'] === undefined ? undefined : resolve(values['cpu-prof']),
    openLoopRates: values['open-loop'] === undefined ? undefined : rates(values['open-loop']),
    phases: values.phases
      ?.split(',')
      .map((p) => p.trim())
      .filter((p) => p.length > 0),
    given: {
      duration: values.duration === undefined ? undefined : seconds(values.duration, 'duration', 10, 1),
      warmup: values.warmup === undefined ? undefined : seconds(values.warmup, 'warmup', 2, 0),
    },
  };
}

/** `--open-loop 8000,16000`: whole requests/s ≥ 1, each once, in the order given. */
function rates(value: string): number[] {
  const list = value.split(',').map((rate) => rate.trim());
  if (list.some((rate) => !/^\d+$/.test(rate) || Number(rate) < 1 || !Number.isSafeInteger(Number(rate)))) {
    throw new UsageError(`--open-loop takes requests/s, whole numbers ≥ 1 separated by commas; got ${JSON.stringify(value)}`);
  }
  return [...new Set(list.map(Number))];
}

function placement(value: string | undefined): RedisPlacement {
  if (value === undefined || value === 'server' || value === 'load') return value ?? 'server';
  throw new UsageError(`--redis-cpu takes "server" or "load"; got ${JSON.stringify(value)}`);
}

function seconds(value: string | undefined, name: string, fallback: number, min: number): number {
  return value === undefined ? fallback : wholeNumber(value, name, min);
}

function wholeNumber(value: string, name: string, min: number): number {
  // wrk takes whole seconds and connections; reject "1.5" rather than silently rounding it.
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be a whole number ≥ ${min}; got ${JSON.stringify(value)}`);
  return n;
}
