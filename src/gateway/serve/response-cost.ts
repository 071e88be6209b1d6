/** Settling a forwarded request's charges: the response's body is tapped on its way to the client for the cost it reports, and each charge is settled once when the response closes. */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { Transform, type Writable } from 'node:stream';
import type { Charge } from '../rules/rule-cost.js';
import type { UsageReader } from './response-usage.js';

/** The cost readers of one forwarded request. */
export interface CostWatch {
  /** Response header names that report a cost: never taken from the client's request. */
  readonly headerNames: readonly string[];
  /** Hands the upstream's status and headers to the readers and returns where the body goes: a tap that passes every chunk on to `res`. */
  body(status: number, headers: IncomingHttpHeaders): Writable;
}

/**
 * Watches `res` for the cost its upstream reports (`bodiless` for an
 * answer to HEAD, which has no body to read), and settles every charge
 * once: with the reported cost as soon as the upstream's body has been
 * handed on whole, before the client's response ends, so that a client
 * sending its next request on seeing the end is decided after the
 * settlement; at the estimate when the response closes without that (the
 * client left mid-response, the upstream failed mid-body, the gateway
 * answered itself). 'close' comes exactly once per response, whichever way
 * it ends, and a charge settles only once.
 */
export function observeCost(res: ServerResponse, charges: readonly Charge[], bodiless: boolean): CostWatch {
  const readers = charges.map((charge) => charge.cost.reader());
  res.once('close', () => {
    for (const charge of charges) charge.settle(undefined);
  });
  const headerNames: string[] = [];
  for (const charge of charges) if (charge.cost.source.kind === 'header') headerNames.push(charge.cost.source.header);
  return {
    headerNames,
    body: (status, headers) => {
      for (const reader of readers) reader.head(status, headers, bodiless);
      return tap(res, readers, () => charges.forEach((charge, i) => charge.settle(readers[i]!.usage())));
    },
  };
}

/**
 * The forwarded request's headers without the cost headers: a client's
 * `x-usage-tokens` must not reach an upstream (or a framework) that might
 * copy request headers into its answer and so pick the client's own price.
 */
export function withoutUsageHeaders(headers: Record<string, string | string[]>, watch: CostWatch): Record<string, string | string[]> {
  for (const name of watch.headerNames) delete headers[name];
  return headers;
}

/**
 * A pass-through into `res` that shows each chunk to the readers first,
 * and calls `ended` when the upstream's body ends whole:
 * nothing is held back or copied for the client, and `pipe` keeps the
 * client's backpressure on the upstream.
 */
function tap(res: ServerResponse, readers: readonly UsageReader[], ended: () => void): Writable {
  const through = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (const reader of readers) reader.data(chunk);
      done(null, chunk);
    },
    // The upstream's body is whole (flush runs only on a normal end, before the end is passed to the client).
    flush(done) {
      ended();
      done();
    },
  });
  through.pipe(res);
  // Whatever cut the body (an upstream failure, an abort) cuts the client's response too: it must not look whole.
  through.once('error', () => res.destroy());
  return through;
}
