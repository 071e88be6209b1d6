/** A rule whose requests cost what the upstream's response reports: the rule's HttpLimiter holds the estimate as reservations, and the response's reader says what to commit when it ends. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpLimiter } from '../../http/http-limiter.js';
import type { RateLimitInfo } from '../../http/types.js';
import type { UsageSource } from '../config/settings.js';
import { UsageReader, type UsageWarn } from '../serve/response-usage.js';
import type { Hold } from './rule-slots.js';

/**
 * What a rule with `cost` adds to its HttpLimiter: the estimate is the
 * request's `cost` (so the rule's policies still decide all or nothing in
 * one step, and a refusal is the usual 429), and {@link actual} is its
 * `actualCost`: each policy's units are held as a reservation and
 * committed at what the response reported when it ends, by the
 * reservation's rules (docs/reservations.md).
 */
export class RuleCost {
  /** The reader of each forwarded request's response, while it runs. */
  private readonly readers = new WeakMap<IncomingMessage, UsageReader>();

  /**
   * @param rule - the rule's name, for warnings
   * @param estimate - units reserved when a request is admitted
   * @param source - where the response reports its actual cost
   * @param warn - receives one-time warnings about the rule's responses
   */
  constructor(
    readonly rule: string,
    readonly estimate: number,
    readonly source: UsageSource,
    private readonly warn: UsageWarn,
  ) {}

  /**
   * The rule's `actualCost`, asked when the response has ended: what the
   * upstream reported, once its body was passed on whole; undefined (the
   * estimate stays charged) when it reported nothing usable, when the client
   * left or the upstream failed mid-response, or when the gateway answered
   * itself. Never a cancel: once forwarded, the upstream may have done the work.
   */
  actual(req: IncomingMessage): number | undefined {
    return this.readers.get(req)?.reported();
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

/** One admitted request of a rule with `cost`, until its response is watched. */
export class Charge implements Hold {
  /**
   * @param cost - the rule's cost settings
   * @param limiter - the rule's HttpLimiter, which holds the request's reservations
   * @param info - what it counted
   */
  constructor(
    readonly cost: RuleCost,
    private readonly limiter: HttpLimiter<IncomingMessage>,
    private readonly info: RateLimitInfo,
  ) {}

  /**
   * Watches the forwarded request's response: returns the reader the
   * response's head and body go to, and has the rule's HttpLimiter commit
   * the request's reservations when the response ends (finished, or its
   * connection closed, whichever comes first; exactly once).
   */
  watch(req: IncomingMessage, res: ServerResponse): UsageReader {
    const reader = this.cost.read(req);
    this.limiter.watchResponse(req, res, this.info);
    return reader;
  }

  /** Not forwarded after all: a slot of the rule (with `concurrency`) is freed now; the estimate stays charged. */
  abandon(req: IncomingMessage): void {
    this.limiter.release(req, this.info);
  }
}
