/** Scenario overload: the gateway's `overload:` section in front of an upstream with a fixed capacity, offered up to 3 × it (issue 35). */
import { fileURLToPath } from 'node:url';
import { runOverload } from '../overload/run.js';
import { CAPACITY, PHASE_RUNS, UPSTREAM } from '../overload/phases.js';
import { defineScenario } from '../types.js';

const gateway = fileURLToPath(new URL('../overload/gateway.ts', import.meta.url));

/**
 * Not a wrk scenario: bench/overload/run.ts runs it (open-loop Poisson load
 * with a client deadline against a simulated thread-pool upstream, phases a
 * to f, `--phases a,c` for some). The variants list its runs for `npm run bench`.
 */
export default defineScenario({
  name: 'overload',
  description: `overload protection: ${UPSTREAM.workers} workers × ${UPSTREAM.baseMs} ms upstream (${CAPACITY}/s), open-loop up to 3 × capacity; goodput, tails, priorities, tenants, a capacity drop`,
  variants: PHASE_RUNS.map((run) => ({ name: run.variant, description: `(${run.phase}) ${run.description}`, server: gateway })),
  run: runOverload,
});
