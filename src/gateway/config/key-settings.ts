/** The key sources a rule reads from the request itself (cookie, query, path, method, token claim) and compounds of them. */
import type { KeyObject } from 'node:crypto';

/**
 * A key read from the request: a cookie, a query parameter, the path (whole,
 * a segment or a named group of the rule's `pathPattern`), the method, or a
 * claim of the bearer token.
 */
export type ReadKeySettings =
  /** A cookie's value (`cookie:NAME`), percent-decoded as cookie parsers do; missing, 401. */
  | { readonly kind: 'cookie'; readonly name: string }
  /** A query parameter's value (`query:NAME`), decoded as a form (`+` is a space); missing, 401. */
  | { readonly kind: 'query'; readonly name: string }
  /**
   * The canonical path (`path`), its Nth segment (`path:N`, from 1), or a
   * named group of the rule's `pathPattern` (`path:{name}`); missing, 400.
   */
  | { readonly kind: 'path'; readonly segment?: number | undefined; readonly group?: string | undefined }
  /** The request method (`method`). */
  | { readonly kind: 'method' }
  /** A claim of the `Authorization: Bearer` token (`jwt:sub`), verified as `jwt:` says; missing or invalid, 401. */
  | { readonly kind: 'jwt'; readonly claim: string };

/** One part of a compound key: the client address, a header's value, or a key read from the request. */
export type KeyPartSettings =
  { readonly kind: 'ip' } | { readonly kind: 'header'; readonly header: string; readonly fallbackToIp: false } | ReadKeySettings;

/** Several key sources at once (`header:x-api-key + path`, or a YAML list): a request counts under the tuple of their values. */
export interface CompoundKeySettings {
  /** The kind. */
  readonly kind: 'compound';
  /** The parts, in the order written (two to eight, none twice). */
  readonly parts: readonly KeyPartSettings[];
}

/** What a bearer token is verified with. */
export type JwtKeySettings =
  /** A JSON Web Key Set file: the token's `kid` (or its algorithm, when it has none) picks the key. */
  | { readonly kind: 'jwks'; readonly jwks: { readonly keys: ReadonlyArray<Record<string, unknown>> }; readonly file: string }
  /** One public key (PEM) or one HMAC secret (a file of at least 32 bytes). */
  | { readonly kind: 'public' | 'secret'; readonly key: KeyObject; readonly file: string };

/** How `jwt:CLAIM` keys verify the token before any claim of it is counted. */
interface JwtVerifySettings {
  /** The key or key set. */
  readonly key: JwtKeySettings;
  /** The signature algorithms accepted (never `none`, never HMAC with a public key). */
  readonly algorithms: readonly string[];
  /** Accepted `iss` values; undefined for any. */
  readonly issuer: readonly string[] | undefined;
  /** Accepted `aud` values (one must be in the token's); undefined for any. */
  readonly audience: readonly string[] | undefined;
  /** Leeway for `exp` and `nbf`, in seconds. */
  readonly clockToleranceSec: number;
}

/** The `jwt:` section. */
export interface JwtSettings {
  /** Verification; undefined when the operator chose `dangerouslyUseUnverifiedClaims: true` (warned at start). */
  readonly verify: JwtVerifySettings | undefined;
  /** The 1-based line of the section, for messages. */
  readonly line?: number | undefined;
}

/** The key sources of a key: a compound's parts, or the key itself. */
export function keyParts<K extends { readonly kind: string }>(key: K | CompoundKeySettings): ReadonlyArray<K | KeyPartSettings> {
  return key.kind === 'compound' ? (key as CompoundKeySettings).parts : [key as K];
}
