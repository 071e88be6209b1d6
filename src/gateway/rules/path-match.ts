/** The canonical form of a request target, so rules match the path the upstream will serve. */
/**
 * No `//`, `.`/`..` segments, escapes, `;` parameters or case games to slip past a path rule.
 */
import type { IncomingMessage } from 'node:http';
import { DEFAULT_PATHS, type PathSettings } from '../config/settings.js';

/** Characters RFC 3986 calls unreserved: their %-escapes mean the character itself. */
const UNRESERVED = /[A-Za-z0-9\-._~]/;
/** What a path needs to contain before it may need work; most do not, and are returned as they are. */
const SUSPECT = /[%\\;#]|\/\/|\/\./;

/** A request target after {@link requestTarget}: what to match and forward. */
export interface CanonicalRequest {
  /** The canonical origin-form target (`/path?query`). */
  readonly target: string;
  /** The authority of an absolute-form target (RFC 9112 §3.2.2: it replaces the Host header); undefined for origin-form. */
  readonly authority: string | undefined;
}

/**
 * Canonicalises a request target (`/path?query`, or an absolute URL as a
 * proxy may receive it) the way nginx does before it matches locations:
 * escapes of unreserved characters are decoded (`%61` → `a`) and other
 * escapes upper-cased, runs of `/` merged, `.` and `..` segments resolved.
 * `paths` says what happens to escaped slashes (`%2F`, `%5C`), `;` path
 * parameters and double encoding (`%25` before two hex digits). An
 * escaped control character (`%00`–`%1F`, `%7F`), a backslash or a
 * fragment is never a path. The query is kept
 * as it is.
 *
 * @returns the canonical target, the same string when nothing changed, or
 *   undefined when the target is refused (a 400): it climbs above the
 *   root with `..`, holds something `paths` refuses, a malformed escape,
 *   or is neither origin-form nor an http(s) URL
 */
export function canonicalTarget(target: string, paths: PathSettings = DEFAULT_PATHS): string | undefined {
  return requestTarget(target, paths)?.target;
}

/**
 * {@link canonicalTarget}, also giving the authority of an absolute-form
 * target, which the caller matches host rules on and forwards as the Host.
 */
export function requestTarget(target: string, paths: PathSettings = DEFAULT_PATHS): CanonicalRequest | undefined {
  if (target.charCodeAt(0) !== 47 /* / */) return fromAbsolute(target, paths);
  const canonical = originForm(target, paths);
  return canonical === undefined ? undefined : { target: canonical, authority: undefined };
}

function originForm(target: string, paths: PathSettings): string | undefined {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (!SUSPECT.test(path)) return target;
  // A backslash is a separator to some servers and data to others; a fragment is never sent by a client that means well.
  if (path.includes('\\') || path.includes('#')) return undefined;
  const withoutParams = semicolons(path, paths.semicolons);
  if (withoutParams === undefined) return undefined;
  const decoded = decodeEscapes(withoutParams, paths);
  if (decoded === undefined) return undefined;
  const resolved = removeDotSegments(decoded.replace(/\/{2,}/g, '/'));
  if (resolved === undefined) return undefined;
  const canonical = q < 0 ? resolved : resolved + target.slice(q);
  return canonical === target ? target : canonical;
}

/**
 * `;` path parameters (`/api;v=1/x`, `/api/..;/x`): Tomcat and Spring drop
 * them before routing, Express and most Node routers keep them as data, so
 * a gateway cannot know which reading the upstream makes: refused unless
 * the configuration says which.
 */
function semicolons(path: string, mode: PathSettings['semicolons']): string | undefined {
  if (!path.includes(';') || mode === 'keep') return path;
  if (mode === 'reject') return undefined;
  // Each segment's parameters run from its first `;` to the next `/`.
  return path.replace(/;[^/]*/g, '');
}

/** An absolute-form target (`http://host/path?q`): its authority and its origin-form part, canonicalised. */
function fromAbsolute(target: string, paths: PathSettings): CanonicalRequest | undefined {
  // Parsed by hand: WHATWG URL would turn `\` into `/` and resolve `%2e%2e` before the checks above could see them.
  const m = /^https?:\/\/([^/?#\\]*)(.*)$/i.exec(target);
  if (m === null) return undefined;
  const authority = m[1]!;
  // userinfo has no business in a request target, and an empty host none either.
  if (authority === '' || authority.includes('@')) return undefined;
  let rest = m[2]!;
  if (rest === '') rest = '/';
  else if (rest.charCodeAt(0) === 63 /* ? */) rest = `/${rest}`;
  else if (rest.charCodeAt(0) !== 47) return undefined;
  const canonical = originForm(rest, paths);
  return canonical === undefined ? undefined : { target: canonical, authority };
}

/**
 * Decodes %-escapes of unreserved characters and upper-cases the others;
 * undefined for a malformed escape, a NUL, or what `paths` refuses.
 */
function decodeEscapes(path: string, paths: PathSettings): string | undefined {
  if (!path.includes('%')) return path;
  let out = '';
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c !== '%') {
      out += c;
      continue;
    }
    const hex = path.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
    const code = parseInt(hex, 16);
    i += 2;
    // Control characters (NUL above all) are no part of a name; routers that decode first may strip or stop at them.
    if (code < 0x20 || code === 0x7f) return undefined;
    // `%3B` decoded by an upstream before it drops `;` parameters would be one; refused where `;` is.
    if (code === 0x3b && paths.semicolons === 'reject') return undefined;
    if (code === 0x2f || code === 0x5c) {
      // `%2F`, `%5C`: a separator to upstreams that decode before routing, data to those that do not.
      if (paths.escapedSlashes === 'reject') return undefined;
      out += paths.escapedSlashes === 'decode' ? '/' : `%${hex.toUpperCase()}`;
      continue;
    }
    // `%25` before two hex digits: an escape of an escape (`%252F`), which a second decoding somewhere turns into `%2F`.
    if (code === 0x25 && paths.doubleEncoding === 'reject' && /^[0-9A-Fa-f]{2}/.test(path.slice(i + 1, i + 3))) return undefined;
    const char = String.fromCharCode(code);
    out += UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  }
  return out;
}

/** RFC 3986 §5.2.4 on an absolute path; undefined when `..` would climb above the root. */
function removeDotSegments(path: string): string | undefined {
  const segments = path.split('/');
  const out: string[] = [];
  // segments[0] is the empty string before the leading slash.
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.') {
      if (last) out.push('');
    } else if (segment === '..') {
      if (out.length === 0) return undefined;
      out.pop();
      if (last) out.push('');
    } else {
      out.push(segment);
    }
  }
  return `/${out.join('/')}`;
}

/**
 * Checks and canonicalises a request in place before anything matches it:
 * `req.url` becomes the canonical origin-form target, and an absolute-form
 * target's authority replaces the Host header (RFC 9112 §3.2.2), so host
 * rules, X-Forwarded-Host and the upstream all see the one host.
 *
 * @returns the canonical target, or undefined when the request is to be
 *   refused with 400: a target {@link requestTarget} refuses, or a request
 *   line without an HTTP version (HTTP/0.9, which node's parser admits)
 */
export function acceptTarget(req: IncomingMessage, paths: PathSettings): string | undefined {
  if (req.httpVersionMajor < 1) return undefined;
  const canonical = requestTarget(req.url ?? '/', paths);
  if (canonical === undefined) return undefined;
  if (canonical.target !== req.url) req.url = canonical.target;
  if (canonical.authority !== undefined) req.headers.host = canonical.authority;
  return canonical.target;
}

/**
 * The host name a host rule matches: lower case, without port, without
 * the trailing dot(s) of a fully qualified name (`api.example.com.` is
 * the same host to DNS and to most upstreams).
 */
export function canonicalHost(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (v.startsWith('[')) return v.slice(0, v.indexOf(']') + 1);
  const colon = v.indexOf(':');
  const name = colon < 0 ? v : v.slice(0, colon);
  return name.replace(/\.+$/, '');
}
