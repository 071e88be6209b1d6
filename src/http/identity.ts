/** Client identity: who a request comes from (its address, as text and as a limiter key). */
/**
 * The limiter key groups IPv6 addresses by subnet; the identity is memoised per socket or framework address.
 */
import { ipKey } from './client-keys.js';
import { formatIp, type IpAddress } from './ip-address.js';
import type { HttpSettings } from './settings.js';
import type { ClientInfo, RequestView } from './types.js';

/** Key used when the client address cannot be known (socket already gone, unparseable framework IP). */
export const UNKNOWN_CLIENT_KEY = 'unknown';

/** Entries in an HttpLimiter's identity memo before it starts over. */
const MAX_MEMOISED_IDENTITIES = 4096;

/** A client's address as parsed, as text (for callbacks) and as its limiter key (grouped by IPv6 subnet). */
export interface Identity {
  /** The parsed address; undefined when it cannot be known. */
  readonly address: IpAddress | undefined;
  /** The address as text, for callbacks. */
  readonly ip: string | undefined;
  /** The limiter key of the address. */
  readonly key: string;
}

/** The identities of one HttpLimiter's requests. */
export class ClientIdentities<Raw> {
  private readonly memo = new Map<string, Identity>();
  /** The forwarded-header watch until it has warned; then nothing more is looked at per request. */
  private watchForwarded: HttpSettings<Raw>['watchForwarded'];

  /** @param settings - the resolved options (how the address is found, the IPv6 subnet) */
  constructor(private readonly settings: HttpSettings<Raw>) {
    this.watchForwarded = settings.watchForwarded;
  }

  /** The client's address, its text and its IP key; memoised per input string when proxy headers play no part. */
  identify(view: RequestView<Raw>): Identity {
    if (this.watchForwarded !== undefined && this.watchForwarded(view.headers)) this.watchForwarded = undefined;
    const input = this.settings.identityInput?.(view);
    if (input !== undefined) {
      const known = this.memo.get(input);
      if (known !== undefined) return known;
    }
    const address = this.settings.resolveIp(view);
    const identity: Identity = {
      address,
      ip: address === undefined ? undefined : formatIp(address),
      key: address === undefined ? UNKNOWN_CLIENT_KEY : ipKey(address, this.settings.ipv6Subnet),
    };
    if (input !== undefined) {
      // Bounded: a flood of distinct addresses only costs the memo its hits.
      if (this.memo.size >= MAX_MEMOISED_IDENTITIES) this.memo.clear();
      this.memo.set(input, identity);
    }
    return identity;
  }
}

/** What user callbacks see of the request. */
export function clientInfo<Raw>(view: RequestView<Raw>, identity: Identity): ClientInfo {
  return { ip: identity.ip, method: view.method, path: view.path, headers: view.headers };
}
