/** The overload scenario's phases (a to f of issue 35's acceptance) and their gateway configs, loads and upstream events. */
import type { Mix } from './load.js';

/** The simulated upstream: workers, work per request, and so its capacity. */
export const UPSTREAM = { workers: 20, baseMs: 50, jitter: 0.1 } as const;

/** Requests per second the upstream completes at most: workers × 1000 / base. */
export const CAPACITY = (UPSTREAM.workers * 1000) / UPSTREAM.baseMs;

/** The client deadline: a response later than this (or none) is not goodput. */
export const DEADLINE_MS = 2000;

/**
 * The gate's queue where the figure is goodput and the admitted tail (phases
 * c and f): a short wait. Under sustained overload the queue is never empty,
 * and its oldest waiter, the next served, has waited nearly the whole
 * timeout, so every admitted request's latency is the upstream's plus about
 * this much; a refusal after 20 ms, with Retry-After, is one an overloaded
 * client can act on.
 */
const SHORT_QUEUE = 'queue: { timeout: 20ms, maxQueue: 1000 }';

/**
 * The queue where the figure is who gets served (phases d and e): the
 * section's defaults. A class or a tenant can only be preferred among
 * requests that wait: a critical request that finds every slot held must
 * wait for one to end (the upstream's 50 ms), and a 20 ms wait would refuse
 * some of them while sheddable work admitted a moment earlier runs.
 */
const DEFAULT_QUEUE = 'queue: { timeout: 1s, maxQueue: 1000 }';

/** The overload section with an adaptive limit; `tenant` and the queue as given. */
function adaptive(tenant: string, queue: string, priorities = false): string {
  return [
    'overload:',
    '  limit: adaptive',
    '  adaptive: { maxLimit: 500 }',
    ...(priorities
      ? [
          '  priorities:',
          '    - { name: critical, match: { headers: { x-priority: critical } } }',
          '    - { name: default }',
          '    - { name: sheddable, match: { headers: { x-priority: sheddable } } }',
        ]
      : []),
    `  tenant: ${tenant}`,
    `  ${queue}`,
    '  errorStatuses: [503, 504]',
  ].join('\n');
}

/** One tenant, no class header: the load of phases a to c and f. */
const ONE: Mix = { tenants: { t1: 1 }, classes: { default: 1 } };
/** Two classes, half each. */
const CLASSES: Mix = { tenants: { t1: 1 }, classes: { critical: 1, sheddable: 1 } };
/** Four tenants, one sending ten times each other's rate. */
const TENANTS: Mix = { tenants: { noisy: 10, q1: 1, q2: 1, q3: 1 }, classes: { default: 1 } };

/** A change to the upstream's workers at a share of the measured period (1/3 of 21 s: at 7 s). */
export interface UpstreamEvent {
  readonly atShare: number;
  readonly workers: number;
}

/** One measured run: a gateway config under one load. */
export interface PhaseRun {
  /** The phase letter `--phases` selects by. */
  readonly phase: 'a' | 'b' | 'c' | 'd' | 'e' | 'f';
  /** Row name, e.g. `c-adaptive`. */
  readonly variant: string;
  readonly description: string;
  /** Offered load as a multiple of {@link CAPACITY}. */
  readonly load: number;
  /** The `overload:` section, or undefined for the gateway without one (no limiter). */
  readonly overload: string | undefined;
  readonly mix: Mix;
  /** Measured seconds when `--duration` is not given (with it, this run takes `--duration` × this / 15). */
  readonly durationS: number;
  readonly events?: readonly UpstreamEvent[];
}

/** Every run, in the order they go. */
export const PHASE_RUNS: readonly PhaseRun[] = [
  {
    phase: 'a',
    variant: 'a-unloaded',
    description: '0.3 × capacity, no limiter: the unloaded p99 every ratio refers to',
    load: 0.3,
    overload: undefined,
    mix: ONE,
    durationS: 15,
  },
  {
    phase: 'b',
    variant: 'b-no-limiter',
    description: '3 × capacity, the gateway without overload: (its defaults: 128 upstream connections, a 10 s wait for one)',
    load: 3,
    overload: undefined,
    mix: ONE,
    durationS: 15,
  },
  {
    phase: 'c',
    variant: `c-fixed-${UPSTREAM.workers}`,
    description: `3 × capacity, overload.limit: ${UPSTREAM.workers} (the upstream's workers: the right fixed limit, known here), queue 20 ms`,
    load: 3,
    overload: ['overload:', `  limit: ${UPSTREAM.workers}`, `  ${SHORT_QUEUE}`, '  errorStatuses: [503, 504]'].join('\n'),
    mix: ONE,
    durationS: 15,
  },
  {
    phase: 'c',
    variant: 'c-adaptive',
    description: '3 × capacity, overload.limit: adaptive, queue 20 ms',
    load: 3,
    overload: adaptive('header:x-tenant', SHORT_QUEUE),
    mix: ONE,
    durationS: 15,
  },
  {
    phase: 'd',
    variant: 'd-classes-1.5x',
    description: '1.5 × capacity, half critical, half sheddable, adaptive, queue 1 s',
    load: 1.5,
    overload: adaptive('header:x-tenant', DEFAULT_QUEUE, true),
    mix: CLASSES,
    durationS: 15,
  },
  {
    phase: 'd',
    variant: 'd-classes-3x',
    description: '3 × capacity, half critical, half sheddable, adaptive, queue 1 s',
    load: 3,
    overload: adaptive('header:x-tenant', DEFAULT_QUEUE, true),
    mix: CLASSES,
    durationS: 15,
  },
  {
    phase: 'e',
    variant: 'e-tenants-fair',
    description: '3 × capacity, 4 tenants (one at 10 × each other), adaptive, queue 1 s, tenant: header:x-tenant',
    load: 3,
    overload: adaptive('header:x-tenant', DEFAULT_QUEUE),
    mix: TENANTS,
    durationS: 15,
  },
  {
    phase: 'e',
    variant: 'e-tenants-global',
    description: 'the same with fairness off (tenant: global)',
    load: 3,
    overload: adaptive('global', DEFAULT_QUEUE),
    mix: TENANTS,
    durationS: 15,
  },
  {
    phase: 'f',
    variant: 'f-capacity-halves',
    description: `3 × full capacity, adaptive, queue 20 ms; the upstream drops to ${UPSTREAM.workers / 2} workers at 1/3 of the run (7 s) and back at 2/3 (14 s)`,
    load: 3,
    overload: adaptive('header:x-tenant', SHORT_QUEUE),
    mix: ONE,
    durationS: 21,
    events: [
      { atShare: 1 / 3, workers: UPSTREAM.workers / 2 },
      { atShare: 2 / 3, workers: UPSTREAM.workers },
    ],
  },
];
