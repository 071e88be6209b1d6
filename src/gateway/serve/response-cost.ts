/** Watching a forwarded request's charges. */
/**
 * The response's head and body are shown to each charged rule's reader on their way to the client (or drained after it
 * left), and each rule commits what was read when the upstream exchange ends.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Charge } from '../rules/rule-cost.js';

/** The cost readers of one forwarded request. */
export interface CostWatch {
  /** Response header names that report a cost: never taken from the client's request. */
  readonly headerNames: readonly string[];
  /** True when a rule reads its cost from the body, which the gateway must get whole and uncompressed. */
  readonly readsBody: boolean;
  /** Bytes of the answer to drain after the client left, to learn its usage: the largest `cost.drainBytes` of the charged rules. */
  readonly drainBytes: number;
  /** True when a charged rule has `cost.requestUsage`: a buffered streaming JSON request is made to ask for its usage. */
  readonly requestUsage: boolean;
  /** The upstream's status and headers. */
  head(status: number, headers: IncomingHttpHeaders): void;
  /** One body chunk, as it goes to the client (or is drained). */
  data(chunk: Buffer): void;
  /** The body has ended whole: the readers take the usage now, before the response ends and settles. */
  whole(): void;
  /** The exchange is over: whatever body a reader kept is let go (a body cut short is never parsed). */
  done(): void;
}

/**
 * Watches `res` for the cost its upstream reports (`bodiless` for an
 * answer to HEAD, which has no body to read): each charge's rule gets a
 * reader of the response and commits its reservations when the upstream
 * exchange ends (see ResponseRelay): at the usage read, at `cost.missing`
 * when a 2xx reported none or was cut before it, at the estimate when the
 * gateway answered itself or the answer is not a 2xx; a rule with `count`
 * at 1 or 0 by the response's status.
 * @param boundMs - the most the commit waits for the exchange after the client left
 */
export function observeCost(
  req: IncomingMessage,
  res: ServerResponse,
  charges: readonly Charge[],
  bodiless: boolean,
  boundMs: number,
): CostWatch {
  const readers = charges.map((charge) => charge.watch(req, res, boundMs));
  const headerNames: string[] = [];
  let readsBody = false;
  let drainBytes = 0;
  let requestUsage = false;
  for (const charge of charges) {
    requestUsage ||= charge.cost.requestUsage;
    const source = charge.cost.source;
    // A rule with count reads only the status: nothing to strip, no body to ask for whole.
    if (source?.kind === 'header') headerNames.push(source.header);
    else if (source !== undefined) readsBody = true;
    drainBytes = Math.max(drainBytes, charge.cost.drainBytes);
  }
  return {
    headerNames,
    readsBody,
    drainBytes,
    requestUsage,
    head: (status, headers) => {
      for (const reader of readers) reader.head(status, headers, bodiless);
    },
    data: (chunk) => {
      for (const reader of readers) reader.data(chunk);
    },
    whole: () => {
      for (const reader of readers) reader.usage();
    },
    done: () => {
      for (const reader of readers) reader.discard();
    },
  };
}

/**
 * The forwarded request's headers without the cost headers: a client's
 * `x-usage-tokens` must not reach an upstream (or a framework) that might
 * copy request headers into its answer and so pick the client's own price.
 * When a rule reads the cost from the body, the upstream is asked for the
 * whole body, uncompressed: `Accept-Encoding: identity` (a compressed body
 * cannot be read, and a client could otherwise ask for gzip from an
 * upstream that compresses when asked), and no `Range` / `If-Range` (a
 * client could ask for the part of the body that leaves the usage out).
 */
export function withoutUsageHeaders(headers: Record<string, string | string[]>, watch: CostWatch): Record<string, string | string[]> {
  for (const name of watch.headerNames) delete headers[name];
  if (watch.readsBody) {
    headers['accept-encoding'] = 'identity';
    delete headers['range'];
    delete headers['if-range'];
  }
  return headers;
}
