/** Reading one key part from a request: a header in a compound, a cookie, a query parameter, the path, the method, a claim. */
/**
 * Each reader answers the part's value or the refusal for it: a part sent twice is ambiguous (400: the upstream may
 * read either copy), a missing or empty one is answered as a missing API key is (401; 400 for the path), an invalid
 * token 401. Values are decoded as the upstream's parsers decode them, so that one identity has one spelling.
 */
import type { IncomingMessage } from 'node:http';
import type { RequestView } from '../../http/index.js';
import type { KeyPartSettings, MatchSettings } from '../config/settings.js';
import type { JwtClaims } from './jwt-claims.js';
import { keepsFirstCopyOnly, refusal, sentMoreThanOnce, type KeyRefusal } from './key-check.js';

/** A request as the rules see it; `query` where the target's query is not in `raw.url` (the decision endpoint). */
export interface GatewayView extends RequestView<IncomingMessage> {
  /** The query string, without `?`; undefined: the query of `raw.url`. */
  readonly query?: string | undefined;
}

/** A part's value, its refusal, or undefined for the client address (which the limiter resolves). */
export type PartValue = string | KeyRefusal | undefined;

/** Reads one part of a request's key. */
export type PartReader = (view: GatewayView) => PartValue | Promise<PartValue>;

/** What readers need besides their part. */
export interface ReaderContext {
  /** The rule's match (its `pathPattern` holds the groups `path:{name}` reads). */
  readonly match: MatchSettings;
  /** `paths.caseSensitive`: false (the default) lower-cases path keys, as rules match paths in any case. */
  readonly caseSensitive: boolean;
  /** The bearer token's claims, once per request; undefined when no part reads a token. */
  readonly claims: ((view: GatewayView) => Promise<ClaimsOrRefusal>) | undefined;
}

/** A token's claims, or the refusal of the request that carried it (or none). */
export type ClaimsOrRefusal = Readonly<Record<string, unknown>> | KeyRefusal;

/** True for a refusal among part values (values are strings, the address part undefined). */
export function isRefusal(value: unknown): value is KeyRefusal {
  return typeof value === 'object' && value !== null && 'status' in value;
}

/** Methods a `method` key part counts as themselves; HEAD is GET's (the frameworks run GET handlers for it). */
const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'CONNECT', 'TRACE']);

/**
 * A request's method as a key part: HEAD counts as GET, since Express, Koa
 * and Fastify answer it with the GET handler (alternating the two would
 * double a client's budget), and any other method (WebDAV's, or one a
 * client makes up and `X-Original-Method` passes through the decision
 * endpoint) as `OTHER`, so made-up methods are not fresh buckets.
 */
function methodPart(method: string): string {
  const upper = method.toUpperCase();
  if (upper === 'HEAD') return 'GET';
  return METHODS.has(upper) ? upper : 'OTHER';
}

/** The reader of `part`. */
export function partReader(part: KeyPartSettings, context: ReaderContext): PartReader {
  switch (part.kind) {
    case 'ip':
      return () => undefined;
    case 'method':
      return (view) => methodPart(view.method);
    case 'header':
      return headerReader(part.header);
    case 'cookie':
      return cookieReader(part.name);
    case 'query':
      return queryReader(part.name);
    case 'path':
      return pathReader(part, context);
    case 'jwt': {
      const claims = context.claims!;
      const claim = part.claim;
      const noClaim = refusal(401, 'Unauthorized', `The bearer token has no ${claim} claim to count by.`, INVALID_TOKEN);
      return (view) =>
        claims(view).then((answer) => {
          if (isRefusal(answer)) return answer;
          const value = answer[claim];
          if (typeof value === 'string' && value !== '') return value;
          if (typeof value === 'number' && Number.isFinite(value)) return String(value);
          return noClaim;
        });
    }
  }
}

const BEARER: ReadonlyArray<readonly [string, string]> = [['WWW-Authenticate', 'Bearer']];
const INVALID_TOKEN: ReadonlyArray<readonly [string, string]> = [['WWW-Authenticate', 'Bearer error="invalid_token"']];
/** `Bearer` (any case, RFC 9110 §11.1) and one token68. */
const BEARER_TOKEN = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * The claims of the request's bearer token, verified by `jwt`: 400 for a
 * second Authorization field (node keeps the first, the upstream may read
 * the other), 401 without a bearer token or with one that fails. Verified
 * once per request, however many rules and parts read a claim of it.
 */
export function claimsReader(jwt: JwtClaims): (view: GatewayView) => Promise<ClaimsOrRefusal> {
  let reader = readers.get(jwt);
  if (reader !== undefined) return reader;
  const read = tokenClaims(jwt);
  const seen = new WeakMap<object, Promise<ClaimsOrRefusal>>();
  reader = (view) => {
    let pending = seen.get(view.raw);
    if (pending === undefined) seen.set(view.raw, (pending = read(view)));
    return pending;
  };
  readers.set(jwt, reader);
  return reader;
}

/** Each verifier's reader: the rules of one config share one, and so one verification per request. */
const readers = new WeakMap<JwtClaims, (view: GatewayView) => Promise<ClaimsOrRefusal>>();

function tokenClaims(jwt: JwtClaims): (view: GatewayView) => Promise<ClaimsOrRefusal> {
  const missing = refusal(401, 'Unauthorized', 'A bearer token is required (Authorization: Bearer ...).', BEARER, true);
  const repeated = refusal(400, 'Bad Request', 'The Authorization header appears more than once; send one bearer token.', []);
  const invalid = refusal(401, 'Unauthorized', 'The bearer token is not valid.', INVALID_TOKEN);
  return async (view) => {
    const raw = view.headers.authorization;
    if (raw === undefined || raw.trim() === '') return missing;
    if (sentMoreThanOnce(view.raw, view.headers, 'authorization')) return repeated;
    const token = BEARER_TOKEN.exec(raw)?.[1];
    if (token === undefined) return missing;
    const answer = await jwt.claimsOf(token);
    return 'claims' in answer ? answer.claims : invalid;
  };
}

/** A header as a part of a compound key: sent once (else 400), not empty (else 401, as a header key). */
function headerReader(name: string): PartReader {
  const repeated = refusal(400, 'Bad Request', `The ${name} header appears more than once; send the API key once.`, []);
  const missing = refusal(401, 'Unauthorized', `The ${name} header is required.`, [['WWW-Authenticate', `ApiKey header="${name}"`]], true);
  const firstCopyOnly = keepsFirstCopyOnly(name);
  return (view) => {
    const raw = view.headers[name];
    if (raw === undefined) return missing;
    const value = typeof raw === 'string' ? raw : raw.join(', ');
    if ((firstCopyOnly || value.includes(',')) && sentMoreThanOnce(view.raw, view.headers, name)) return repeated;
    const trimmed = value.trim();
    return trimmed === '' ? missing : trimmed;
  };
}

/**
 * A cookie: node joins several Cookie fields with `; `, so one name twice,
 * in one field or two, is ambiguous (400). Names are compared exactly (they
 * are case-sensitive); the value loses its quotes and is percent-decoded,
 * as the `cookie` package behind Express, Koa and Fastify reads it.
 */
function cookieReader(name: string): PartReader {
  const repeated = refusal(400, 'Bad Request', `The cookie ${name} appears more than once; send it once.`, []);
  const missing = refusal(401, 'Unauthorized', `The cookie ${name} is required.`, [['WWW-Authenticate', `ApiKey cookie="${name}"`]], true);
  return (view) => {
    const header = view.headers.cookie;
    if (header === undefined || !header.includes(name)) return missing;
    let found: string | undefined;
    for (const pair of header.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0 || pair.slice(0, eq).trim() !== name) continue;
      if (found !== undefined) return repeated;
      found = pair.slice(eq + 1).trim();
    }
    if (found === undefined) return missing;
    if (found.length >= 2 && found.startsWith('"') && found.endsWith('"')) found = found.slice(1, -1);
    const value = found.includes('%') ? decoded(found) : found;
    return value === '' ? missing : value;
  };
}

/** `decodeURIComponent`, or the text as it is when it holds a malformed escape (as the cookie and qs packages do). */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * A query parameter, decoded as a form (names too: `%6B=a` is `k=a`; `+` is
 * a space), as the upstream's query parser reads it; sent twice (`?k=a&k=b`,
 * or `?k=a&%6B=b`) is ambiguous, 400.
 */
function queryReader(name: string): PartReader {
  const repeated = refusal(400, 'Bad Request', `The query parameter ${name} appears more than once; send it once.`, []);
  const missing = refusal(
    401,
    'Unauthorized',
    `The query parameter ${name} is required.`,
    [['WWW-Authenticate', `ApiKey query="${name}"`]],
    true,
  );
  return (view) => {
    const query = view.query ?? queryOf(view.raw.url);
    // Without an escape, a `+` or the name itself, the parameter cannot be there: no parse.
    if (query === '' || (!query.includes(name) && !query.includes('%') && !query.includes('+'))) return missing;
    const values = new URLSearchParams(query).getAll(name);
    if (values.length > 1) return repeated;
    const value = values[0];
    return value === undefined || value === '' ? missing : value;
  };
}

/** The query of a request target (`/path?query`), without `?`; empty when none. */
function queryOf(url: string | undefined): string {
  const q = url === undefined ? -1 : url.indexOf('?');
  return q < 0 ? '' : url!.slice(q + 1);
}

/**
 * The canonical path (see path-match.ts: `..`, `//`, escapes and `%2F` are
 * settled before rules match), without a trailing slash, or one segment of
 * it, or a named group of the rule's pattern; lower-cased unless paths are
 * case-sensitive, since rules match them in any case. A missing part is 400.
 */
function pathReader(part: Extract<KeyPartSettings, { kind: 'path' }>, context: ReaderContext): PartReader {
  const fold = context.caseSensitive ? (s: string) => s : (s: string) => s.toLowerCase();
  if (part.segment !== undefined) {
    const n = part.segment;
    const missing = refusal(400, 'Bad Request', `The path has no segment ${n} to count by.`, [], true);
    return (view) => {
      const segment = view.path.split('/')[n];
      return segment === undefined || segment === '' ? missing : fold(segment);
    };
  }
  if (part.group !== undefined) {
    const group = part.group;
    const source = context.match.pathPattern!;
    const pattern = context.caseSensitive || source.flags.includes('i') ? source : new RegExp(source.source, `${source.flags}i`);
    const missing = refusal(400, 'Bad Request', `The path has no ${group} part to count by.`, [], true);
    return (view) => {
      const value = pattern.exec(view.path)?.groups?.[group];
      return value === undefined || value === '' ? missing : fold(value);
    };
  }
  return (view) => fold(view.path.length > 1 && view.path.endsWith('/') ? view.path.slice(0, -1) : view.path);
}
