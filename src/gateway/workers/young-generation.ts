/** The V8 flag that gives each gateway worker a young generation sized for many requests in flight. */

/**
 * Semi-space size, in MiB, each `--workers` worker starts with unless the
 * operator chose one. A proxy keeps every request in flight alive across
 * young-generation collections; at V8's default (16 MiB) a gateway with 200
 * connections copied about 4 MB of them at every scavenge, 20 times a second,
 * and spent a quarter more CPU per request than at 64 connections. At 64 MiB
 * scavenges are a quarter as frequent for the same survivors (measured in
 * docs/benchmarks.md "Forwarding", 200 connections). The cost is memory: up
 * to 3 × 48 MiB more young generation per worker, committed only as it grows.
 */
export const WORKER_SEMI_SPACE_MB = 64;

const FLAG = '--max-semi-space-size';

/**
 * The arguments to start a worker's node with: `execArgv` plus
 * {@link WORKER_SEMI_SPACE_MB} as `--max-semi-space-size`, unless `execArgv`
 * or `nodeOptions` (the `NODE_OPTIONS` variable) already set it, which wins.
 */
export function withWorkerSemiSpace(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const chosen = (arg: string): boolean => arg === FLAG || arg.startsWith(`${FLAG}=`) || arg.startsWith('--max_semi_space_size');
  if (execArgv.some(chosen) || (nodeOptions ?? '').split(/\s+/).some(chosen)) return [...execArgv];
  return [...execArgv, `${FLAG}=${WORKER_SEMI_SPACE_MB}`];
}
