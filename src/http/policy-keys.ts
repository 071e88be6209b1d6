/** Per-policy keys: the key each of a route's policies counts a request under. */
/**
 * Used when some policy has its own `key` option.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { boundKey, headerValue } from './client-keys.js';
import { checkedKey, isThenable } from './limiter-parts.js';
import type { NamedPolicy, PolicyKeys } from './settings.js';
import type { ApiKeySource, ClientInfo } from './types.js';

/** What the keys of a request's policies depend on besides the request itself. */
export interface KeyInputs {
  /** The route's key, already bounded: the key of every policy without its own. */
  readonly routeKey: string;
  /** The client's address key (grouped by IPv6 subnet), for `key: "ip"`. */
  readonly ipKey: string;
  /** The request headers, for `key: { header }`. */
  readonly headers: IncomingHttpHeaders;
  /** Longer keys are hashed, as the route's are. */
  readonly maxKeyLength: number;
}

/** True when some policy counts under its own key; a plain loop, so the usual route (none has) allocates nothing. */
export function hasOwnKeys(policies: readonly NamedPolicy[]): boolean {
  for (const p of policies) if (p.key !== undefined) return true;
  return false;
}

/** The key of policy `i`: its own when `keys` holds one per policy, else the route's. */
export function keyAt(routeKey: string, keys: PolicyKeys | undefined, i: number): string {
  return keys === undefined ? routeKey : keys[i]!;
}

/**
 * Every policy's key: the route's, the client address key, a header's value
 * or a key function's answer (checked and bounded like the route key's).
 * Header keys are read first, so a request without one is answered before
 * any key function runs: the missing header's source comes back instead of
 * keys, and the caller answers it as it answers a missing route key.
 * @throws FloodgateError INVALID_KEY when a key function answers anything but a non-empty string (as a rejection when it is async)
 */
export function policyKeys(
  policies: readonly NamedPolicy[],
  raw: unknown,
  client: () => ClientInfo,
  inputs: KeyInputs,
): PolicyKeys | Required<ApiKeySource> | Promise<PolicyKeys> {
  const keys: Array<string | PromiseLike<string>> = new Array<string>(policies.length);
  for (let i = 0; i < policies.length; i++) {
    const source = policies[i]!.key;
    if (source === undefined) keys[i] = inputs.routeKey;
    else if (source === 'ip') keys[i] = inputs.ipKey;
    else if (typeof source === 'object') {
      const value = headerValue(inputs.headers, source.header);
      if (value === undefined) return source;
      keys[i] = boundKey(value, inputs.maxKeyLength);
    }
  }
  let waiting = false;
  let info: ClientInfo | undefined;
  for (let i = 0; i < policies.length; i++) {
    const source = policies[i]!.key;
    if (typeof source !== 'function') continue;
    const answer = source(raw, (info ??= client()));
    if (isThenable(answer)) {
      waiting = true;
      keys[i] = Promise.resolve(answer).then((value) => boundKey(checkedKey(value), inputs.maxKeyLength));
    } else keys[i] = boundKey(checkedKey(answer), inputs.maxKeyLength);
  }
  return waiting ? Promise.all(keys) : (keys as string[]);
}
