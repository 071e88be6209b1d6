/** A rule whose requests cost what the upstream's response reports. */
/**
 * The rule's HttpLimiter holds the estimate as reservations, and the response's reader says what to commit when it
 * ends (`cost.missing` when it should have reported and did not).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { HttpLimiter, RateLimitInfo } from '../../http/index.js';
import { WarningCode } from '../../core/warnings.js';
import type { CostSettings, UsageSource } from '../config/settings.js';
import { UsageReader, type UsageWarn } from './response-usage.js';
import type { Hold } from './rule-slots.js';

/** What reads one forwarded request's response for a rule that settles its units from it. */
export interface ResponseReader {
  /** The upstream's status and headers (`bodiless` for an answer to HEAD). */
  head(status: number, headers: IncomingHttpHeaders, bodiless?: boolean): void;
  /** One body chunk, as it goes to the client (or is drained). */
  data(chunk: Buffer): void;
  /** The body has ended whole. */
  usage(): unknown;
  /** The exchange is over: whatever was kept is let go. */
  discard(): void;
}

/**
 * A rule whose units are held before forwarding and settled from the
 * response: by the cost it reports ({@link RuleCost}) or by whether its
 * status counts (RuleCount, rule-count.ts). The proxy watches both the same
 * way (response-cost.ts).
 */
export interface ResponsePrice {
  /** The rule's name. */
  readonly rule: string;
  /** Units held per request before it is forwarded. */
  readonly estimate: number;
  /** Where the response reports its cost; undefined when only the status is read. */
  readonly source: UsageSource | undefined;
  /** Bytes of the answer read after its client left (see ResponseRelay). */
  readonly drainBytes: number;
  /** Streaming JSON requests are made to ask for their usage. */
  readonly requestUsage: boolean;
  /** The units to commit once the upstream exchange of `req` ended; undefined keeps the estimate. */
  actual(req: IncomingMessage, res: ServerResponse): number | undefined;
  /** The charge of a request the rule's `limiter` admitted with `info`; undefined when nothing was counted (an allow-listed request). */
  charge(limiter: HttpLimiter<IncomingMessage>, info: RateLimitInfo | undefined): Charge | undefined;
  /** Starts reading `req`'s response. */
  read(req: IncomingMessage): ResponseReader;
}

/**
 * What a rule with `cost` adds to its HttpLimiter: the estimate is the
 * request's `cost` (so the rule's policies still decide all or nothing in
 * one step, and a refusal is the usual 429), and {@link actual} is its
 * `actualCost`: each policy's units are held as a reservation and
 * committed at what the response reported when it ends, by the
 * reservation's rules (docs/reservations.md).
 */
export class RuleCost implements ResponsePrice {
  /** The reader of each forwarded request's response, while it runs. */
  private readonly readers = new WeakMap<IncomingMessage, UsageReader>();

  /** Units reserved when a request is admitted. */
  readonly estimate: number;
  /** Where the response reports its actual cost. */
  readonly source: UsageSource;
  /** Units charged when a response that should report its cost does not (`cost.missing`). */
  readonly missing: number;
  /** Bytes of the answer read after its client left, to learn its usage (`cost.drainBytes`). */
  readonly drainBytes: number;
  /** Streaming JSON requests are made to ask for their usage (`cost.requestUsage`). */
  readonly requestUsage: boolean;

  /**
   * @param rule - the rule's name, for warnings and the metric
   * @param settings - the rule's `cost`
   * @param warn - receives one-time warnings about the rule's responses
   * @param counted - called with the rule's name for each request charged `missing` (`floodgate_cost_missing_total`)
   */
  constructor(
    readonly rule: string,
    settings: CostSettings,
    private readonly warn: UsageWarn,
    private readonly counted: (rule: string) => void = () => undefined,
  ) {
    this.estimate = settings.estimate;
    this.source = settings.source;
    this.missing = settings.missing;
    this.drainBytes = settings.drainBytes;
    this.requestUsage = settings.requestUsage;
  }

  /**
   * The rule's `actualCost`, asked when the upstream exchange has ended
   * (drained to its end when the client left first): what the upstream
   * reported; `missing` (or the usage seen before the cut, when larger) when
   * a response that should report a cost did not (see
   * UsageReader.missingReason); undefined (the estimate stays charged) for a
   * non-2xx, a 204, a HEAD, an invalid usage, or an answer the gateway gave
   * itself. Never a cancel: once forwarded, the upstream may have done the work.
   */
  actual(req: IncomingMessage): number | undefined {
    const reader = this.readers.get(req);
    if (reader === undefined) return undefined;
    const reported = reader.reported();
    if (reported !== undefined) return reported;
    const why = reader.missingReason();
    if (why === undefined) return undefined;
    this.counted(this.rule);
    this.warn(
      WarningCode.COST_USAGE_MISSING,
      `rule ${JSON.stringify(this.rule)}: a successful response from the upstream had ${why}, so the request was charged cost.missing (${this.missing} units, not the estimate ${this.estimate}); floodgate_cost_missing_total counts each one. Check that cost.${this.source.kind} names what the upstream sends (an OpenAI-style stream reports usage only when asked: stream_options: { include_usage: true }), or narrow the rule's match to the routes that report a cost.`,
    );
    return Math.max(this.missing, reader.seen() ?? 0);
  }

  /** The charge of a request `limiter` (the rule's) admitted with `info`; undefined when nothing was counted (an allow-listed request). */
  charge(limiter: HttpLimiter<IncomingMessage>, info: RateLimitInfo | undefined): Charge | undefined {
    return info === undefined ? undefined : new Charge(this, limiter, info);
  }

  /** Starts reading `req`'s response for its cost. */
  read(req: IncomingMessage): UsageReader {
    const reader = new UsageReader(this.source, this.rule, this.warn);
    this.readers.set(req, reader);
    return reader;
  }
}

/** One admitted request of a rule with `cost` or `count`, until its response is watched. */
export class Charge implements Hold {
  /**
   * @param cost - how the rule settles its units from the response
   * @param limiter - the rule's HttpLimiter, which holds the request's reservations
   * @param info - what it counted
   */
  constructor(
    readonly cost: ResponsePrice,
    private readonly limiter: HttpLimiter<IncomingMessage>,
    private readonly info: RateLimitInfo,
  ) {}

  /**
   * Watches the forwarded request's response: returns the reader the
   * response's head and body go to, and has the rule's HttpLimiter commit
   * the request's reservations when the upstream exchange ends (the
   * response finished, or, its client gone, the answer was drained or cut;
   * at most `boundMs` after the client left; exactly once).
   */
  watch(req: IncomingMessage, res: ServerResponse, boundMs: number): ResponseReader {
    const reader = this.cost.read(req);
    this.limiter.watchResponse(req, res, this.info, boundMs);
    return reader;
  }

  /** Not forwarded after all: a slot of the rule (with `concurrency`) is freed now; the estimate stays charged. */
  abandon(req: IncomingMessage): void {
    this.limiter.release(req, this.info);
  }
}
