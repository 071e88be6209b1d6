/** One request on its way through HttpLimiter's stages. */
/**
 * The single object each stage reads and fills in, instead of argument trains.
 */
import type { Reservation } from '../limiter/reservation.js';
import { clientInfo, type Identity } from './identity.js';
import type { NamedPolicy, PolicyKeys } from './settings.js';
import type { ClientInfo, RequestView } from './types.js';

/**
 * What counted a request: its policies, the key each counted it under and
 * its cost. All that rewarding its units needs, so the helpers that do it
 * take this and not the whole request.
 */
export interface Counted {
  /** The policies that counted the request, in the route's order. */
  readonly policies: readonly NamedPolicy[];
  /** The route's key: the key of every policy without its own. */
  readonly key: string;
  /** One key per policy, when some policy has its own; undefined when every policy counts under {@link key}. */
  readonly keys: PolicyKeys | undefined;
  /** The units the request was charged under each policy. */
  readonly cost: number;
}

/**
 * One request, from its view to its outcome. Built once per request by
 * HttpLimiter, every field set from the start (the only object the path
 * allocates for it, and one shape for all), then filled in stage by stage: the key once the lists are passed, the
 * policies and cost once they are known, per-policy keys when some policy
 * has its own. An admitted request's context is kept until its response
 * ends when something acts then (see ResponseBound).
 */
export interface RequestContext<Raw> extends Counted {
  /** The adapter's view of the request. */
  readonly view: RequestView<Raw>;
  /** The framework's request, handed to every user callback. */
  readonly raw: Raw;
  /** Who the request comes from. */
  readonly identity: Identity;
  /** What user callbacks see of the request, built the first time one is called (see {@link clientOf}). */
  client: ClientInfo | undefined;
  /** The route's key, bounded; empty until the allow and deny lists are passed. */
  key: string;
  /** The request's policies: the route's, or the ones the `limiter` function chose. */
  policies: readonly NamedPolicy[];
  keys: PolicyKeys | undefined;
  /** The request's cost; 0 until it is known. */
  cost: number;
  /** Each policy's clock before the stores decided, when units are held as reservations (see ResponseBound.noteStart). */
  started: readonly number[] | undefined;
  /** Each counting policy's units as a reservation, once admitted, when they are settled after the response or may be rewarded for want of a slot. */
  reservations: readonly Reservation[] | undefined;
}

/** The request as user callbacks see it, built once per request: `skip`, the key, the `limiter` and `cost` functions all get the same. */
export function clientOf<Raw>(context: RequestContext<Raw>): ClientInfo {
  return (context.client ??= clientInfo(context.view, context.identity));
}
