/** How the compatibility check prints and compares RLS answers: every field but the time left in the window. */
import type { RlsAnswer, RlsStatus } from './client.js';

function formatStatus(s: RlsStatus): string {
  return `${s.code} limit=${s.currentLimit ?? 'none'} remaining=${s.limitRemaining}`;
}

/** One line: the overall code and each descriptor's status, or the gRPC error code. */
export function formatAnswer(answer: RlsAnswer): string {
  if (answer.kind === 'error') return `gRPC error ${answer.grpcCode} (${answer.message})`;
  return `${answer.overallCode} [${answer.statuses.map(formatStatus).join('; ')}]`;
}

/**
 * True when two answers decide the same: the overall code, and per
 * descriptor the code, the limit and what remains; for errors, the gRPC
 * status code (messages are each server's own words). duration_until_reset
 * is left out: it depends on when each side ran.
 */
export function sameAnswer(a: RlsAnswer, b: RlsAnswer, okRemainingMayDiffer = false): boolean {
  if (a.kind === 'error' || b.kind === 'error') return a.kind === 'error' && b.kind === 'error' && a.grpcCode === b.grpcCode;
  if (a.overallCode !== b.overallCode || a.statuses.length !== b.statuses.length) return false;
  return a.statuses.every((s, i) => {
    const t = b.statuses[i]!;
    const remaining = s.limitRemaining === t.limitRemaining || (okRemainingMayDiffer && s.code === 'OK' && a.overallCode === 'OVER_LIMIT');
    return s.code === t.code && s.currentLimit === t.currentLimit && remaining;
  });
}
