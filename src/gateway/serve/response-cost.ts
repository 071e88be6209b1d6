/** Watching a forwarded request's charges: the response's body is tapped on its way to the client for the cost it reports, which each charged rule commits when the response ends. */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Transform, type Writable } from 'node:stream';
import type { Charge } from '../rules/rule-cost.js';
import type { UsageReader } from './response-usage.js';

/** The cost readers of one forwarded request. */
export interface CostWatch {
  /** Response header names that report a cost: never taken from the client's request. */
  readonly headerNames: readonly string[];
  /** True when a rule reads its cost from the body, which the gateway cannot decode when compressed. */
  readonly readsBody: boolean;
  /** Hands the upstream's status and headers to the readers and returns where the body goes: a tap that passes every chunk on to `res`. */
  body(status: number, headers: IncomingHttpHeaders): Writable;
}

/**
 * Watches `res` for the cost its upstream reports (`bodiless` for an
 * answer to HEAD, which has no body to read): each charge's rule gets a
 * reader of the response and commits its reservations when the response
 * ends. A reader's usage is read when the upstream's body has been passed
 * on whole, before the client's response ends, so the commit, which runs
 * when it finishes, finds it; a response cut short, or answered by the
 * gateway itself, reports nothing and the estimates stay charged.
 */
export function observeCost(req: IncomingMessage, res: ServerResponse, charges: readonly Charge[], bodiless: boolean): CostWatch {
  const readers = charges.map((charge) => charge.watch(req, res));
  // However the response ends, the body a reader kept is let go (a response cut short is never parsed).
  res.once('close', () => {
    for (const reader of readers) reader.discard();
  });
  const headerNames: string[] = [];
  let readsBody = false;
  for (const charge of charges) {
    if (charge.cost.source.kind === 'header') headerNames.push(charge.cost.source.header);
    else readsBody = true;
  }
  return {
    headerNames,
    readsBody,
    body: (status, headers) => {
      for (const reader of readers) reader.head(status, headers, bodiless);
      return tap(res, readers);
    },
  };
}

/**
 * The forwarded request's headers without the cost headers: a client's
 * `x-usage-tokens` must not reach an upstream (or a framework) that might
 * copy request headers into its answer and so pick the client's own price.
 * When a rule reads the cost from the body, the upstream is asked for an
 * uncompressed one (`Accept-Encoding: identity`): a compressed body cannot
 * be read, so a client sending `Accept-Encoding: gzip` to an upstream that
 * compresses when asked would otherwise pay the estimate whatever it used.
 */
export function withoutUsageHeaders(headers: Record<string, string | string[]>, watch: CostWatch): Record<string, string | string[]> {
  for (const name of watch.headerNames) delete headers[name];
  if (watch.readsBody) headers['accept-encoding'] = 'identity';
  return headers;
}

/**
 * A pass-through into `res` that shows each chunk to the readers first,
 * and ends their reading when the upstream's body ends whole:
 * nothing is held back or copied for the client, and `pipe` keeps the
 * client's backpressure on the upstream.
 */
function tap(res: ServerResponse, readers: readonly UsageReader[]): Writable {
  const through = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (const reader of readers) reader.data(chunk);
      done(null, chunk);
    },
    // The upstream's body is whole (flush runs only on a normal end, before the end is passed to the client).
    flush(done) {
      for (const reader of readers) reader.usage();
      done();
    },
  });
  through.pipe(res);
  // Whatever cut the body (an upstream failure, an abort) cuts the client's response too: it must not look whole.
  through.once('error', () => res.destroy());
  return through;
}
