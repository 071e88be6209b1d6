/** A rule that counts only the responses whose status it names (`count: { status: [401, 403] }`). */
/**
 * Each admitted request holds one unit while it is answered, and keeps it when its status counts; otherwise the unit
 * goes back. Settled through the same reservations and response watch as a rule with `cost`.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { HttpLimiter, RateLimitInfo } from '../../http/index.js';
import { DEFAULT_DRAIN_BYTES } from '../config/cost-config.js';
import type { CountSettings } from '../config/settings.js';
import { Charge, type ResponsePrice, type ResponseReader } from './rule-cost.js';

/**
 * What a rule with `count` adds to its HttpLimiter: a request costs 1 up
 * front, held as a reservation in every policy, so the check before
 * forwarding sees the responses counted so far plus the requests still
 * being answered (a key at its limit is refused, and N requests in flight
 * at once cannot all pass on a count that none of them has reached yet);
 * {@link actual} commits 1 when the status the client got (or would have
 * got) counts, 0 otherwise.
 */
export class RuleCount implements ResponsePrice {
  /** The upstream status of each forwarded request, once its head arrived. */
  private readonly statuses = new WeakMap<IncomingMessage, StatusReader>();
  private readonly counted: ReadonlySet<number>;
  private readonly classes: ReadonlySet<number>;

  /** One unit held per request until its status is known. */
  readonly estimate = 1;
  /** Nothing is read but the status. */
  readonly source = undefined;
  /** The status is in the head; the rest of an answer whose client left is drained as any watched answer is. */
  readonly drainBytes = DEFAULT_DRAIN_BYTES;
  readonly requestUsage = false;

  /**
   * @param rule - the rule's name
   * @param settings - the rule's `count`
   */
  constructor(
    readonly rule: string,
    settings: CountSettings,
  ) {
    this.counted = new Set(settings.statuses);
    this.classes = new Set(settings.classes);
  }

  /** True when a response with `status` counts. */
  counts(status: number): boolean {
    return this.counted.has(status) || this.classes.has(Math.floor(status / 100));
  }

  /**
   * The units a request keeps once its upstream exchange ended: 1 when the
   * status counts, 0 when it does not. The status is the upstream's (also
   * when the client left and the answer was drained), else the one the
   * gateway answered itself after admitting and sent whole (502 or 504 when
   * the upstream failed, 503 when no upstream connection freed up, 408 for
   * a body too slow). Undefined (the unit stays: fail-closed) when no status
   * was ever known: the client left before an answer, and the upstream then
   * failed or was never asked (the closed response is then ended with
   * node's default 200, which nobody received: hence `destroyed`).
   */
  actual(req: IncomingMessage, res: ServerResponse): number | undefined {
    const seen = this.statuses.get(req)?.status;
    const status = seen ?? (res.headersSent && !res.destroyed ? res.statusCode : undefined);
    if (status === undefined) return undefined;
    return this.counts(status) ? 1 : 0;
  }

  charge(limiter: HttpLimiter<IncomingMessage>, info: RateLimitInfo | undefined): Charge | undefined {
    return info === undefined ? undefined : new Charge(this, limiter, info);
  }

  read(req: IncomingMessage): ResponseReader {
    const reader = new StatusReader();
    this.statuses.set(req, reader);
    return reader;
  }
}

/** Keeps the upstream's status of one response; the body is not read. */
class StatusReader implements ResponseReader {
  status: number | undefined;

  head(status: number, _headers: IncomingHttpHeaders): void {
    this.status = status;
  }

  data(): void {}

  usage(): undefined {
    return undefined;
  }

  discard(): void {}
}
