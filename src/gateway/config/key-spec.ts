/** The string and list forms of a key (`--key`, a rule's or a policy's `key:`), parsed into KeySettings. */
/**
 * `ip`, `global`, `header:NAME`, `header:NAME,ip`, `cookie:NAME`, `query:NAME`, `path`, `path:N`, `path:{name}`,
 * `method`, `jwt:CLAIM`, and compounds of them joined by `+` (or written as a YAML list).
 */
import { describeValue } from '../../core/describe-value.js';
import { InvalidValue, parseHeaderName } from './values.js';
import type { KeyPartSettings } from './key-settings.js';
import { keyLabel } from './policy-names.js';
import type { KeySettings } from './settings.js';

/** Most parts of a compound key. */
const MAX_PARTS = 8;
/** Deepest path segment a `path:N` key may name. */
const MAX_SEGMENT = 32;
/** A cookie name: an RFC 6265 token, without `+` (the compound separator). */
const COOKIE_NAME = /^[!#$%&'*\-.^_`|~0-9A-Za-z]{1,64}$/;
/** A query parameter name as written in the config (requests are matched after decoding). */
const QUERY_NAME = /^[A-Za-z0-9._~\-[\]]{1,64}$/;
/** A claim name: `sub`, `org_id`, `https://example.com/tenant`. */
const CLAIM_NAME = /^[A-Za-z0-9._~:/-]{1,128}$/;
/** A named group of a regular expression. */
const GROUP_NAME = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;

const FORMS =
  '"ip", "header:NAME" (e.g. "header:x-api-key"), "header:NAME,ip" (the header, else the client address), "cookie:NAME", "query:NAME", "path", "path:N" (the Nth segment), "path:{name}" (a named group of the rule\'s pathPattern), "method", "jwt:CLAIM" (e.g. "jwt:sub"), "global" (one counter for every client), or several joined by " + " (e.g. "header:x-api-key + path")';

/**
 * Parses a key's string form, or a list of parts (a compound key).
 * @throws InvalidValue naming the forms that exist
 */
export function parseKeySpec(value: unknown): KeySettings {
  if (Array.isArray(value)) return compound(value);
  if (typeof value !== 'string') throw new InvalidValue(`must be ${FORMS}; got ${describeValue(value)}.`);
  const text = value.trim();
  if (text.includes('+')) return compound(text.split('+').map((part) => part.trim()));
  return single(text, value);
}

/** One source, as it may stand alone (`global` and `header:NAME,ip` included). */
function single(text: string, written: unknown): KeySettings {
  if (text === 'ip') return { kind: 'ip' };
  if (text === 'global') return { kind: 'global' };
  if (text === 'method') return { kind: 'method' };
  if (text === 'path') return { kind: 'path' };
  const colon = text.indexOf(':');
  // A source without its argument (`cookie`, `jwt`) is answered with every form, as any unknown word is.
  if (colon < 0) throw new InvalidValue(`must be ${FORMS}; got ${describeValue(written)}.`);
  const kind = text.slice(0, colon);
  const arg = text.slice(colon + 1);
  switch (kind) {
    case 'header': {
      const m = /^([^,\s]+)(,ip)?$/.exec(arg);
      if (m !== null) return { kind: 'header', header: parseHeaderName(m[1]), fallbackToIp: m[2] !== undefined };
      break;
    }
    case 'cookie':
      if (COOKIE_NAME.test(arg)) return { kind: 'cookie', name: arg };
      throw new InvalidValue(`names a cookie as NAME in cookie:NAME (letters, digits and !#$%&'*-.^_\`|~); got ${describeValue(written)}.`);
    case 'query':
      if (QUERY_NAME.test(arg)) return { kind: 'query', name: arg };
      throw new InvalidValue(`names a query parameter as NAME in query:NAME (letters, digits and ._~-[]); got ${describeValue(written)}.`);
    case 'path': {
      if (/^\d{1,2}$/.test(arg) && Number(arg) >= 1 && Number(arg) <= MAX_SEGMENT) return { kind: 'path', segment: Number(arg) };
      const group = /^\{(.*)\}$/.exec(arg)?.[1];
      if (group !== undefined && GROUP_NAME.test(group)) return { kind: 'path', group };
      throw new InvalidValue(
        `is "path" (the whole path), "path:N" (segment N, from 1 to ${MAX_SEGMENT}: /users/42 has "users" as 1 and "42" as 2) or "path:{name}" (the group (?<name>...) of the rule's pathPattern); got ${describeValue(written)}.`,
      );
    }
    case 'jwt':
      if (CLAIM_NAME.test(arg)) return { kind: 'jwt', claim: arg };
      throw new InvalidValue(
        `names a claim of the bearer token as CLAIM in jwt:CLAIM, e.g. jwt:sub or jwt:org_id; got ${describeValue(written)}.`,
      );
  }
  throw new InvalidValue(`must be ${FORMS}; got ${describeValue(written)}.`);
}

/** A compound key: two to eight distinct parts, none of them `global` or a fallback. */
function compound(parts: readonly unknown[]): KeySettings {
  if (parts.length < 2 || parts.length > MAX_PARTS)
    throw new InvalidValue(
      `as a compound key must list 2 to ${MAX_PARTS} parts (e.g. "header:x-api-key + path" or [header:x-api-key, path]); got ${parts.length}.`,
    );
  const seen = new Set<string>();
  const out = parts.map((part): KeyPartSettings => {
    if (typeof part !== 'string' || part.trim() === '' || part.includes('+'))
      throw new InvalidValue(
        `each part of a compound key must be one key source such as "header:x-api-key" or "path"; got ${describeValue(part)}.`,
      );
    const key = single(part.trim(), part);
    if (key.kind === 'global')
      throw new InvalidValue('"global" is the same for every request, so as a part of a compound key it changes nothing; remove it.');
    if (key.kind === 'header' && key.fallbackToIp)
      throw new InvalidValue(
        `"${part.trim()}" falls back to the address, which a compound key cannot do part by part; write the parts it needs (e.g. "header:NAME + ip").`,
      );
    const label = keyLabel(key);
    if (seen.has(label)) throw new InvalidValue(`names ${JSON.stringify(label)} twice; each part of a compound key once.`);
    seen.add(label);
    return key as KeyPartSettings;
  });
  return { kind: 'compound', parts: out };
}
