/** The canonical form of a request target, so rules match the path the upstream will serve: no `//`, `.`/`..` segments or needless %-escapes to slip past a path rule. */

/** Characters RFC 3986 calls unreserved: their %-escapes mean the character itself. */
const UNRESERVED = /[A-Za-z0-9\-._~]/;
/** What a target needs to contain before it may need work; most do not, and are returned as they are. */
const SUSPECT = /%|\/\/|\/\.|\\/;

/**
 * Canonicalises a request target (`/path?query`, or an absolute URL as a
 * proxy may receive it) the way nginx does before it matches locations:
 * escapes of unreserved characters are decoded (`%61` → `a`) and other
 * escapes upper-cased, runs of `/` merged, `.` and `..` segments resolved.
 * `%2F` stays escaped (it is not a separator). The query is kept as it is.
 *
 * @returns the canonical target, the same string when nothing changed, or
 *   undefined when the target is not a path (a 400): it climbs above the
 *   root with `..`, holds a backslash or a malformed escape, or is neither
 *   origin-form nor an http(s) URL
 */
export function canonicalTarget(target: string): string | undefined {
  if (target.charCodeAt(0) !== 47 /* / */) return fromAbsolute(target);
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  if (!SUSPECT.test(path)) return target;
  if (path.includes('\\')) return undefined;
  const decoded = decodeUnreserved(path);
  if (decoded === undefined) return undefined;
  const resolved = removeDotSegments(decoded.replace(/\/{2,}/g, '/'));
  if (resolved === undefined) return undefined;
  const canonical = q < 0 ? resolved : resolved + target.slice(q);
  return canonical === target ? target : canonical;
}

/** An absolute-form target (`http://host/path?q`): its origin-form part, canonicalised. */
function fromAbsolute(target: string): string | undefined {
  if (!/^https?:\/\//i.test(target)) return undefined;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return undefined;
  }
  // URL has resolved dot segments already; the rest of the work is the same as for origin-form.
  return canonicalTarget(url.pathname + url.search);
}

/** Decodes %-escapes of unreserved characters and upper-cases the others; undefined for a malformed escape. */
function decodeUnreserved(path: string): string | undefined {
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
    const char = String.fromCharCode(parseInt(hex, 16));
    out += UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
    i += 2;
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
