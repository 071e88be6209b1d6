/** FloodgateError and the stable error codes every part of floodgate throws. */

/**
 * Stable error codes. Codes never change meaning between releases, so callers
 * may branch on them; messages may be reworded.
 */
export const ErrorCode = {
  /** An option name the constructor does not know (often a typo). */
  UNKNOWN_OPTION: 'FLOODGATE_UNKNOWN_OPTION',
  /** An options argument that is not a plain object, or a required option is missing. */
  INVALID_OPTIONS: 'FLOODGATE_INVALID_OPTIONS',
  /** `limit` is not a positive safe integer. */
  INVALID_LIMIT: 'FLOODGATE_INVALID_LIMIT',
  /** `window` is not a positive duration. */
  INVALID_WINDOW: 'FLOODGATE_INVALID_WINDOW',
  /** A duration (other than the window) is malformed or out of range. */
  INVALID_DURATION: 'FLOODGATE_INVALID_DURATION',
  /** `algorithm` is not one of the supported names. */
  INVALID_ALGORITHM: 'FLOODGATE_INVALID_ALGORITHM',
  /** A cost or amount is not a positive safe integer. */
  INVALID_COST: 'FLOODGATE_INVALID_COST',
  /** The cost of one call is larger than the limit, so it could never be admitted. */
  COST_EXCEEDS_LIMIT: 'FLOODGATE_COST_EXCEEDS_LIMIT',
  /** A key is not a non-empty string. */
  INVALID_KEY: 'FLOODGATE_INVALID_KEY',
  /** `store` does not implement the Store contract. */
  INVALID_STORE: 'FLOODGATE_INVALID_STORE',
  /** A Redis client that floodgate cannot drive. */
  INVALID_CLIENT: 'FLOODGATE_INVALID_CLIENT',
  /** Two options that cannot be used together. */
  CONFLICTING_OPTIONS: 'FLOODGATE_CONFLICTING_OPTIONS',
  /** `limit × window` is too large for exact integer arithmetic. */
  LIMIT_TOO_LARGE: 'FLOODGATE_LIMIT_TOO_LARGE',
  /** The store failed (connection lost, script error, …). `cause` holds the original error. */
  STORE_ERROR: 'FLOODGATE_STORE_ERROR',
  /** The store did not answer within its timeout. */
  STORE_TIMEOUT: 'FLOODGATE_STORE_TIMEOUT',
  /** The circuit breaker is open: the store failed repeatedly and is not being called. */
  CIRCUIT_OPEN: 'FLOODGATE_CIRCUIT_OPEN',
  /** The store or limiter was closed. */
  CLOSED: 'FLOODGATE_CLOSED',
  /** A gateway config file field is missing, of the wrong type or out of range; the message names the file, line and field. */
  INVALID_CONFIG: 'FLOODGATE_INVALID_CONFIG',
  /** A gateway config file is not valid YAML; the message names the file and line. */
  CONFIG_SYNTAX: 'FLOODGATE_CONFIG_SYNTAX',
  /** A gateway config file cannot be read (missing, unreadable). */
  CONFIG_UNREADABLE: 'FLOODGATE_CONFIG_UNREADABLE',
  /** A command-line argument of the `floodgate` CLI is unknown or malformed. */
  INVALID_ARGUMENT: 'FLOODGATE_INVALID_ARGUMENT',
  /** An optional package the gateway needs (undici, prom-client, yaml, pino, ioredis) is not installed. */
  MISSING_DEPENDENCY: 'FLOODGATE_MISSING_DEPENDENCY',
  /** The gateway cannot listen on its address (port in use, address not on this host, no permission). */
  LISTEN_FAILED: 'FLOODGATE_LISTEN_FAILED',
} as const;

/** One of the values of {@link ErrorCode}. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The only error type floodgate throws or rejects with. Check `code`, not the
 * message.
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
