/** A variant's measurement (or failure) as its result row: the figures rounded, the ratio taken against the round's baseline. */
import type { Measured } from './measure-variant.js';
import type { Row } from './report.js';

/**
 * The row of `variant` from its measurement, or a row of nulls with the
 * error's message when it failed; `baseRps` is the baseline's requests/s in
 * the same round (null when the baseline failed: no ratio).
 */
export function toRow(
  scenario: string,
  variant: string,
  result: Measured | Error,
  baseRps: number | null,
  durationS: number,
  connections: number,
): Row {
  if (result instanceof Error) {
    return {
      scenario,
      variant,
      rps: null,
      p50Ms: null,
      p99Ms: null,
      redisCmdsPerReq: null,
      ratio: null,
      serverCpuUsPerReq: null,
      requests: null,
      p90Ms: null,
      maxMs: null,
      status: null,
      socketErrors: null,
      redisCommands: null,
      durationS,
      connections,
      error: result.message,
    };
  }
  const { wrk, serverCpuMs, redisCommands, fixedRate, openLoop } = result;
  const redisCalls = redisCommands ? Object.values(redisCommands).reduce((a, b) => a + b, 0) : null;
  return {
    scenario,
    variant,
    rps: round(wrk.rps, 1),
    p50Ms: round(wrk.p50Ms, 3),
    p99Ms: round(wrk.p99Ms, 3),
    redisCmdsPerReq: redisCalls === null ? null : wrk.requests > 0 ? round(redisCalls / wrk.requests, 4) : 0,
    ratio: baseRps ? round(wrk.rps / baseRps, 3) : null,
    serverCpuUsPerReq: serverCpuMs === null || wrk.requests === 0 ? null : round((serverCpuMs * 1000) / wrk.requests, 2),
    requests: wrk.requests,
    p90Ms: round(wrk.p90Ms, 3),
    maxMs: round(wrk.maxMs, 3),
    status: wrk.status,
    socketErrors: wrk.socketErrors,
    redisCommands,
    durationS: round(wrk.durationS, 3),
    connections,
    ...(openLoop.length === 0
      ? {}
      : {
          openLoop: openLoop.map((o) => ({
            ...o,
            achievedRps: round(o.achievedRps, 1),
            p50Ms: round(o.p50Ms, 3),
            p99Ms: round(o.p99Ms, 3),
          })),
        }),
    ...(fixedRate === null
      ? {}
      : {
          fixedRate: {
            targetRps: fixedRate.targetRps,
            achievedRps: round(fixedRate.achievedRps, 1),
            requests: fixedRate.requests,
            p50Ms: round(fixedRate.p50Ms, 3),
            p99Ms: round(fixedRate.p99Ms, 3),
            maxMs: round(fixedRate.maxMs, 3),
            errors: fixedRate.errors,
            serverCpuUsPerReq: roundOrNull(fixedRate.serverCpuUsPerReq, 2),
            redisCpuUsPerReq: roundOrNull(fixedRate.redisCpuUsPerReq, 2),
          },
        }),
  };
}

function roundOrNull(value: number | null | undefined, digits: number): number | null {
  return value == null ? null : round(value, digits);
}

function round(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}
