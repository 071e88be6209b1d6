/** Scenario egress: OutboundLimiter's scheduling cost per call against p-queue in one process and bottleneck on Redis in four (issue 36). */
import { fileURLToPath } from 'node:url';
import { runEgress } from '../egress/run.js';
import { sharedName, SHARED_VARIANTS } from '../egress/shared-redis.js';
import { ONE_PROCESS_VARIANTS, PROCESSES } from '../egress/workload.js';
import { defineScenario } from '../types.js';

const oneProcess = fileURLToPath(new URL('../egress/one-process.ts', import.meta.url));
const worker = fileURLToPath(new URL('../egress/worker.ts', import.meta.url));

/**
 * Not a wrk scenario: bench/egress/run.ts runs it (`--phases one` or `four` for one part, `--rounds N`). The variants
 * list its parts for `npm run bench`.
 */
export default defineScenario({
  name: 'egress',
  description: `outbound scheduling: CPU µs per call against p-queue in one process; calls/s against bottleneck's Redis clustering in ${PROCESSES} processes`,
  variants: [
    ...ONE_PROCESS_VARIANTS.map((v) => ({ name: `one/${v}`, description: `(one) ${v}`, server: oneProcess })),
    ...SHARED_VARIANTS.map((v) => ({
      name: `four/${sharedName(v)}`,
      description: `(four) ${v.library}, ${v.budget} budget on one Redis`,
      server: worker,
      redis: true,
    })),
  ],
  run: runEgress,
});
