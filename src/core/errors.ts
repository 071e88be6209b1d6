/** FloodgateError and the stable error codes every part of floodgate throws. */

/**
 * Stable error codes. Codes never change meaning between releases, so callers
 * may branch on them; messages may be reworded. docs/errors.md gives each
 * code's causes and fixes.
 */
export const ErrorCode = {
  /** An option name the constructor does not know (often a typo). Cause and fix: docs/errors.md#floodgate_unknown_option. */
  UNKNOWN_OPTION: 'FLOODGATE_UNKNOWN_OPTION',
  /** An options argument that is not a plain object, or a required option is missing. Cause and fix: docs/errors.md#floodgate_invalid_options. */
  INVALID_OPTIONS: 'FLOODGATE_INVALID_OPTIONS',
  /** `limit` is not a positive safe integer. Cause and fix: docs/errors.md#floodgate_invalid_limit. */
  INVALID_LIMIT: 'FLOODGATE_INVALID_LIMIT',
  /** A token bucket's `burst` is not a whole number of at least 1, or `burst` is set on another algorithm. Cause and fix: docs/errors.md#floodgate_invalid_burst. */
  INVALID_BURST: 'FLOODGATE_INVALID_BURST',
  /** A token bucket's `initialTokens` is not a whole number from 0 to its burst, or is set on another algorithm. Cause and fix: docs/errors.md#floodgate_invalid_initial_tokens. */
  INVALID_INITIAL_TOKENS: 'FLOODGATE_INVALID_INITIAL_TOKENS',
  /** `window` is not a positive duration. Cause and fix: docs/errors.md#floodgate_invalid_window. */
  INVALID_WINDOW: 'FLOODGATE_INVALID_WINDOW',
  /** A duration (other than the window) is malformed or out of range. Cause and fix: docs/errors.md#floodgate_invalid_duration. */
  INVALID_DURATION: 'FLOODGATE_INVALID_DURATION',
  /** `algorithm` is not one of the supported names. Cause and fix: docs/errors.md#floodgate_invalid_algorithm. */
  INVALID_ALGORITHM: 'FLOODGATE_INVALID_ALGORITHM',
  /** A cost or amount is not a positive safe integer. Cause and fix: docs/errors.md#floodgate_invalid_cost. */
  INVALID_COST: 'FLOODGATE_INVALID_COST',
  /** The cost of one call is larger than the limit, so it could never be admitted. Cause and fix: docs/errors.md#floodgate_cost_exceeds_limit. */
  COST_EXCEEDS_LIMIT: 'FLOODGATE_COST_EXCEEDS_LIMIT',
  /** A key is not a non-empty string. Cause and fix: docs/errors.md#floodgate_invalid_key. */
  INVALID_KEY: 'FLOODGATE_INVALID_KEY',
  /** `store` does not implement the Store contract. Cause and fix: docs/errors.md#floodgate_invalid_store. */
  INVALID_STORE: 'FLOODGATE_INVALID_STORE',
  /** A Redis client that floodgate cannot drive. Cause and fix: docs/errors.md#floodgate_invalid_client. */
  INVALID_CLIENT: 'FLOODGATE_INVALID_CLIENT',
  /** Two options that cannot be used together. Cause and fix: docs/errors.md#floodgate_conflicting_options. */
  CONFLICTING_OPTIONS: 'FLOODGATE_CONFLICTING_OPTIONS',
  /** `limit × window` is too large for exact integer arithmetic. Cause and fix: docs/errors.md#floodgate_limit_too_large. */
  LIMIT_TOO_LARGE: 'FLOODGATE_LIMIT_TOO_LARGE',
  /** A composite decision (`consumeAll`) whose parts cannot be decided together: none, too many, not RateLimiters, on different stores, or two on one store key. Cause and fix: docs/errors.md#floodgate_invalid_composite. */
  INVALID_COMPOSITE: 'FLOODGATE_INVALID_COMPOSITE',
  /** The parts' store cannot decide several keys in one atomic step (it has no `consumeAll`). Cause and fix: docs/errors.md#floodgate_composite_unsupported. */
  COMPOSITE_UNSUPPORTED: 'FLOODGATE_COMPOSITE_UNSUPPORTED',
  /** On Redis Cluster, a composite's keys hash to different slots, so no one script can touch them all. Cause and fix: docs/errors.md#floodgate_cross_slot. */
  CROSS_SLOT: 'FLOODGATE_CROSS_SLOT',
  /** `commit` or `cancel` was called a second time on one reservation. Cause and fix: docs/errors.md#floodgate_reservation_settled. */
  RESERVATION_SETTLED: 'FLOODGATE_RESERVATION_SETTLED',
  /** The store failed (connection lost, script error, …). `cause` holds the original error. Cause and fix: docs/errors.md#floodgate_store_error. */
  STORE_ERROR: 'FLOODGATE_STORE_ERROR',
  /** The store did not answer within its timeout. Cause and fix: docs/errors.md#floodgate_store_timeout. */
  STORE_TIMEOUT: 'FLOODGATE_STORE_TIMEOUT',
  /** The circuit breaker is open: the store failed repeatedly and is not being called. Cause and fix: docs/errors.md#floodgate_circuit_open. */
  CIRCUIT_OPEN: 'FLOODGATE_CIRCUIT_OPEN',
  /** A memory store snapshot cannot be restored: cut short, not a snapshot, a newer version, or a field out of range; the message names the file and field. Cause and fix: docs/errors.md#floodgate_invalid_snapshot. */
  INVALID_SNAPSHOT: 'FLOODGATE_INVALID_SNAPSHOT',
  /** The store or limiter was closed. Cause and fix: docs/errors.md#floodgate_closed. */
  CLOSED: 'FLOODGATE_CLOSED',
  /** A waiting `consume` or `acquire` was abandoned: its `signal` aborted before it was admitted. Cause and fix: docs/errors.md#floodgate_aborted. */
  ABORTED: 'FLOODGATE_ABORTED',
  /** A scheduled call was refused because `maxQueue` calls already waited in this process (OutboundLimiter); nothing was spent. */
  QUEUE_FULL: 'FLOODGATE_QUEUE_FULL',
  /** A scheduled call could not start within its timeout (OutboundLimiter); nothing was spent. */
  DEADLINE_EXCEEDED: 'FLOODGATE_DEADLINE_EXCEEDED',
  /** A gateway config file field is missing, of the wrong type or out of range; the message names the file, line and field. Cause and fix: docs/errors.md#floodgate_invalid_config. */
  INVALID_CONFIG: 'FLOODGATE_INVALID_CONFIG',
  /** A gateway config file is not valid YAML; the message names the file and line. Cause and fix: docs/errors.md#floodgate_config_syntax. */
  CONFIG_SYNTAX: 'FLOODGATE_CONFIG_SYNTAX',
  /** A gateway config file cannot be read (missing, unreadable). Cause and fix: docs/errors.md#floodgate_config_unreadable. */
  CONFIG_UNREADABLE: 'FLOODGATE_CONFIG_UNREADABLE',
  /** A command-line argument of the `floodgate` CLI is unknown or malformed. Cause and fix: docs/errors.md#floodgate_invalid_argument. */
  INVALID_ARGUMENT: 'FLOODGATE_INVALID_ARGUMENT',
  /** An optional package the gateway needs (undici, prom-client, yaml, pino, ioredis) is not installed. Cause and fix: docs/errors.md#floodgate_missing_dependency. */
  MISSING_DEPENDENCY: 'FLOODGATE_MISSING_DEPENDENCY',
  /** At start, the gateway's Redis Cluster seed nodes or Sentinel set-up did not answer within `connectTimeout`, or the sentinels know no master of that name, or a node refused the credentials. Cause and fix: docs/errors.md#floodgate_store_unreachable. */
  STORE_UNREACHABLE: 'FLOODGATE_STORE_UNREACHABLE',
  /** The gateway cannot listen on its address (port in use, address not on this host, no permission). Cause and fix: docs/errors.md#floodgate_listen_failed. */
  LISTEN_FAILED: 'FLOODGATE_LISTEN_FAILED',
} as const;

/** One of the values of {@link ErrorCode}. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The only error type floodgate throws or rejects with. Check `code`, not the
 * message; docs/errors.md explains every code.
 */
export class FloodgateError extends Error {
  /** Stable machine-readable code, one of {@link ErrorCode}. */
  readonly code: ErrorCodeValue;

  /**
   * @param code - stable code from {@link ErrorCode}
   * @param message - what went wrong and how to fix the call
   * @param cause - the underlying error, for store failures
   */
  constructor(code: ErrorCodeValue, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'FloodgateError';
    this.code = code;
  }
}

/** True when `error` is a FloodgateError, optionally with the given code. */
export function isFloodgateError(error: unknown, code?: ErrorCodeValue): error is FloodgateError {
  return error instanceof FloodgateError && (code === undefined || error.code === code);
}

const STORE_FAILURES: ReadonlySet<string> = new Set([
  ErrorCode.STORE_ERROR,
  ErrorCode.STORE_TIMEOUT,
  ErrorCode.CIRCUIT_OPEN,
  ErrorCode.CLOSED,
]);

/**
 * True when `error` means the store could not answer (failed, timed out,
 * closed, or the breaker is open) — the cases a fallback is for — as opposed to a bad
 * call or configuration, which no fallback should hide.
 */
export function isStoreFailure(error: unknown): error is FloodgateError {
  return error instanceof FloodgateError && STORE_FAILURES.has(error.code);
}

/** Wraps any thrown value as a STORE_ERROR unless it already is a FloodgateError. */
export function toStoreError(error: unknown, storeName: string): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const detail = error instanceof Error ? error.message : String(error);
  return new FloodgateError(ErrorCode.STORE_ERROR, `${storeName} store failed: ${detail}`, error);
}
