// The test-only RPC between the test process and its fixture workers: message shapes and a JSON-safe encoding of Infinity.

/** What a fixture worker is started with (env FG_FIXTURE for cluster workers, workerData for threads). */
export interface FixtureConfig {
  /** The ClusterStore's timeoutMs. */
  timeoutMs?: number;
  /** Give the store a clock that reads the time the test sends with each `apply`. */
  clock?: boolean;
  /** The ClusterStore's knownRefusals (its default when absent). */
  knownRefusals?: number;
  /** The ClusterStore's leaseMs (its default, no leases, when absent). */
  leaseMs?: number;
}

/** Test process → fixture. */
export interface RpcRequest {
  fgtest: number;
  m: string;
  a: unknown[];
}

/** Fixture → test process; `fgtest: 0` announces that the fixture is up. */
export interface RpcReply {
  fgtest: number;
  ok?: unknown;
  err?: { code: string; message: string };
}

/** Copies `value` with every Infinity field as the string "Infinity" (node:cluster IPC is JSON). */
export function encodeNumbers<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = v === Infinity ? 'Infinity' : v;
  return out as T;
}

/** Reverses {@link encodeNumbers}. */
export function decodeNumbers<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = v === 'Infinity' ? Infinity : v;
  return out as T;
}
