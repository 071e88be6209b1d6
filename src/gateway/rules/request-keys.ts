/** The keys a rule reads from the request itself, read before counting and handed to its limiter's key functions. */
/**
 * A rule's own key and its policies' keys that are not the address, `global` or a lone header: read once per request
 * (a refusal answers it before anything is counted), kept per request, and a compound's parts encoded so that two
 * different tuples never make one key.
 */
import type { IncomingMessage } from 'node:http';
import { ErrorCode, FloodgateError } from '../../index.js';
import { ipKey, parseIp, type KeySource } from '../../http/index.js';
import { keyParts } from '../config/key-settings.js';
import { keyLabel } from '../config/policy-names.js';
import type { KeyPartSettings, KeySettings, MatchSettings, PolicySettings } from '../config/settings.js';
import type { KeyRefusal } from './key-check.js';
import type { JwtClaims } from './jwt-claims.js';
import { claimsReader, isRefusal, partReader, type GatewayView, type PartReader, type PartValue } from './key-readers.js';

/** True when the gateway reads `key` itself: a compound, or a cookie, query, path, method or claim key. */
export function readsItself(key: KeySettings): boolean {
  return key.kind !== 'ip' && key.kind !== 'global' && key.kind !== 'header';
}

/**
 * Encodes a compound key's values: each as its length, `:`, and itself, so
 * the tuple can be read back from the key and no two tuples share one
 * (`("a:b", "c")` is `3:a:b1:c`, `("a", "b1:c")` is `1:a4:b1:c`).
 */
export function compoundKey(values: readonly string[]): string {
  let key = '';
  for (const value of values) key += `${value.length}:${value}`;
  return key;
}

/** The keys one rule reads itself. */
export class RequestKeys {
  /** Each key's label → its index. */
  private readonly index = new Map<string, number>();
  private readonly readers: PartReader[][] = [];
  /** Each request's part values, by key and part, kept until its key functions ran (and then collected with it). */
  private readonly values = new WeakMap<object, PartValue[][]>();

  /**
   * @param rule - the rule's name, for errors
   * @param keys - the rule's key and its policies' keys
   * @param match - the rule's match (for `path:{name}`)
   * @param caseSensitive - `paths.caseSensitive`
   * @param jwt - the token verifier, when the config has a `jwt:` section (one per config: a request's token is verified once)
   */
  constructor(rule: string, keys: readonly KeySettings[], match: MatchSettings, caseSensitive: boolean, jwt: JwtClaims | undefined) {
    const claims = jwt === undefined ? undefined : claimsReader(jwt);
    for (const key of keys) {
      if (!readsItself(key) || this.index.has(keyLabel(key))) continue;
      const parts = keyParts(key);
      if (claims === undefined && parts.some((p) => p.kind === 'jwt'))
        throw new FloodgateError(
          ErrorCode.INVALID_CONFIG,
          `rule ${JSON.stringify(rule)} counts by a bearer token's claim (${keyLabel(key)}), but nothing verifies the token; add a jwt section to the config file.`,
        );
      this.index.set(keyLabel(key), this.readers.length);
      const context = { match, caseSensitive, claims };
      this.readers.push(parts.map((p) => partReader(p as KeyPartSettings, context)));
    }
  }

  /** True when some key of the rule is read here. */
  get any(): boolean {
    return this.readers.length > 0;
  }

  /**
   * Reads every key of the request and keeps the values for the key
   * functions; the first refusal (in the order the keys and parts are
   * written) instead. A promise only while a bearer token is verified.
   */
  read(view: GatewayView): KeyRefusal | undefined | Promise<KeyRefusal | undefined> {
    const all: PartValue[][] = new Array<PartValue[]>(this.readers.length);
    let waits: Array<Promise<void>> | undefined;
    for (let i = 0; i < this.readers.length; i++) {
      const readers = this.readers[i]!;
      const parts: PartValue[] = new Array<PartValue>(readers.length);
      all[i] = parts;
      for (let j = 0; j < readers.length; j++) {
        const value = readers[j]!(view);
        if (value instanceof Promise) {
          (waits ??= []).push(value.then((v) => void (parts[j] = v)));
          continue;
        }
        if (isRefusal(value)) return value;
        parts[j] = value;
      }
    }
    if (waits === undefined) {
      this.values.set(view.raw, all);
      return undefined;
    }
    return Promise.all(waits).then(() => {
      for (const parts of all) for (const part of parts) if (isRefusal(part)) return part;
      this.values.set(view.raw, all);
      return undefined;
    });
  }

  /** The limiter's key source for `key`, one of the keys given (and read here). */
  source(key: KeySettings): KeySource<IncomingMessage> {
    const i = this.index.get(keyLabel(key))!;
    const parts = keyParts(key);
    const label = keyLabel(key);
    const valuesOf = (req: IncomingMessage): PartValue[] => {
      const values = this.values.get(req)?.[i];
      // Every path to the limiter reads the keys first; a request that did not is a bug, answered as an error, not counted.
      if (values === undefined) throw new FloodgateError(ErrorCode.INVALID_KEY, `the ${label} key of this request was not read`);
      return values;
    };
    if (key.kind !== 'compound') return (req) => valuesOf(req)[0] as string;
    const ipAt = parts.findIndex((p) => p.kind === 'ip');
    return (req, client) => {
      const values = valuesOf(req) as string[];
      if (ipAt >= 0) {
        const ip = client.ip === undefined ? undefined : parseIp(client.ip);
        // Grouped by /64 as the `ip` key is, so one subscriber cannot rotate through its addresses.
        values[ipAt] = ip === undefined ? 'unknown' : ipKey(ip);
      }
      return compoundKey(values);
    };
  }
}

/** Every key of a rule: its own and its policies'. */
export function ruleKeys(key: KeySettings, policies: readonly PolicySettings[]): KeySettings[] {
  const out = [key];
  for (const p of policies) if (p.key !== undefined) out.push(p.key);
  return out;
}
