/** Structured logging (pino) for the gateway, and the short hash that stands for an API key in every log line. */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { PinoModule } from './optional-deps.js';

/** pino levels the CLI accepts. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The gateway's logger type. */
export type GatewayLogger = Logger;

/**
 * Creates the JSON logger on stdout. `base` adds fields to every line (the
 * worker id under `--workers`).
 */
export function createLogger(pinoModule: PinoModule, level: LogLevel, base: Record<string, unknown> = {}): GatewayLogger {
  // ESM gets the function as `default`, CommonJS as the module itself.
  const mod = pinoModule as unknown as { default?: unknown; pino?: unknown };
  const pino = (mod.pino ?? mod.default ?? pinoModule) as typeof import('pino').pino;
  return pino({
    level,
    base: { pid: process.pid, ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Keys that could carry credentials never reach a log line, whoever logs them.
    redact: { paths: ['headers', 'req.headers', '*.headers["x-api-key"]', 'apiKey', 'authorization'], censor: '[redacted]' },
  });
}

/**
 * A short, stable stand-in for an API key or other client-chosen key: the
 * first 12 hex digits of its SHA-256. Enough to follow one client through
 * the logs; useless for replaying its key.
 */
export function keyId(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 12);
}

/** How a rate-limit key appears in logs: IP keys as they are, everything else hashed. */
export function loggableKey(key: string | undefined, isIp: boolean): string | undefined {
  if (key === undefined) return undefined;
  return isIp ? key : `key#${keyId(key)}`;
}
