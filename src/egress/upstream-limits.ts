/** What an upstream's answer says of its own limit: the RateLimit fields, the x-ratelimit families, Retry-After. */
/**
 * Read in this order, the first family present wins: the IETF `RateLimit` / `RateLimit-Policy` fields (structured lists
 * `"name";r=REMAINING;t=SECONDS` and `"name";q=QUOTA;w=SECONDS`), the draft-7 single `RateLimit: limit=…, remaining=…,
 * reset=…`, the draft-6 `RateLimit-Limit` / `-Remaining` / `-Reset`, then `X-RateLimit-Limit` / `-Remaining` / `-Reset`
 * with the `-Requests` and `-Tokens` suffixes OpenAI-style APIs send. A reset is read as seconds from now, an epoch in
 * seconds (GitHub) or ms when it is that large, or a Go-style duration (`1m30s`, `250ms`). `Retry-After` is delta seconds
 * or an HTTP date. Anything that does not parse is left out, never guessed.
 */

/** What one answer said; every field is optional, as upstreams send some and not others. */
export interface UpstreamLimits {
  /** The quota per window. */
  readonly limit?: number;
  /** Units left in the current window. */
  readonly remaining?: number;
  /** ms until the window resets (the quota is whole again). */
  readonly resetMs?: number;
  /** The window's length in ms, when the upstream says it (`RateLimit-Policy` `w`). */
  readonly windowMs?: number;
  /** ms to wait before the next call, from `Retry-After`. */
  readonly retryAfterMs?: number;
}

/** Header fields as node and undici give them: lower-case names, a value or a list of values. */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | undefined>>;

/** Which budget to read from families that report several (`x-ratelimit-*-requests` and `-tokens`). */
export type LimitUnit = 'requests' | 'tokens';

/** Largest number accepted from a header: a quota or remaining count past it is a typo or an attack, not a limit. */
const MAX_COUNT = 2 ** 40;
/** Longest wait accepted from a header (a day): a reset a year out would hold every caller for good. */
const MAX_WAIT_MS = 86_400_000;

/**
 * Reads what `headers` say of the upstream's limit, for `unit`.
 *
 * @param headers - the answer's header fields (lower-case names, as node and undici give them)
 * @param now - the time in ms (epoch resets and HTTP dates are read against it)
 * @param unit - the budget to read where several are sent; default `requests`
 */
export function readUpstreamLimits(headers: HeaderBag, now: number, unit: LimitUnit = 'requests'): UpstreamLimits {
  const retryAfterMs = retryAfter(field(headers, 'retry-after'), now);
  const found = ietf(headers) ?? draft7(headers) ?? families(headers, now, unit);
  if (retryAfterMs === undefined) return found ?? {};
  return { ...found, retryAfterMs };
}

function field(headers: HeaderBag, name: string): string | undefined {
  const v = headers[name];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.join(', ');
}

/** The IETF fields: of several policies, the one with the fewest units left, with its quota and window when listed. */
function ietf(headers: HeaderBag): UpstreamLimits | undefined {
  const rl = field(headers, 'ratelimit');
  if (rl === undefined || !rl.trimStart().startsWith('"')) return undefined;
  const items = sfList(rl);
  let best: { name: string; r: number; t: number | undefined } | undefined;
  for (const item of items) {
    const r = count(item.params.get('r'));
    if (r === undefined) continue;
    if (best === undefined || r < best.r) best = { name: item.name, r, t: seconds(item.params.get('t')) };
  }
  if (best === undefined) return undefined;
  const policy = sfList(field(headers, 'ratelimit-policy') ?? '').find((p) => p.name === best.name);
  const q = count(policy?.params.get('q'));
  const w = seconds(policy?.params.get('w'));
  return clean({ limit: q, remaining: best.r, resetMs: best.t, windowMs: w });
}

/** draft-7: `RateLimit: limit=100, remaining=37, reset=4` (one field), or draft-6's three fields. */
function draft7(headers: HeaderBag): UpstreamLimits | undefined {
  const rl = field(headers, 'ratelimit');
  if (rl !== undefined) {
    const params = new Map<string, string>();
    for (const part of rl.split(',')) {
      const eq = part.indexOf('=');
      if (eq > 0) params.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
    }
    const remaining = count(params.get('remaining'));
    if (remaining !== undefined) return clean({ limit: count(params.get('limit')), remaining, resetMs: seconds(params.get('reset')) });
  }
  const remaining = count(field(headers, 'ratelimit-remaining'));
  if (remaining === undefined) return undefined;
  return clean({
    limit: count(firstItem(field(headers, 'ratelimit-limit'))),
    remaining,
    resetMs: seconds(field(headers, 'ratelimit-reset')),
  });
}

/** `x-ratelimit-*`, with the unit's suffix first (OpenAI-style), then without (GitHub, Twitter, most others). */
function families(headers: HeaderBag, now: number, unit: LimitUnit): UpstreamLimits | undefined {
  for (const suffix of [`-${unit}`, '']) {
    const remaining = count(field(headers, `x-ratelimit-remaining${suffix}`));
    if (remaining === undefined) continue;
    return clean({
      limit: count(field(headers, `x-ratelimit-limit${suffix}`)),
      remaining,
      resetMs: reset(field(headers, `x-ratelimit-reset${suffix}`), now),
    });
  }
  return undefined;
}

/** A reset: delta seconds, an epoch in seconds or ms, or a duration such as `6m0s` or `250ms`. */
function reset(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) {
    const n = Number(text);
    // A number of the size of today's epoch: GitHub's seconds, or some APIs' ms.
    if (n > 1e12) return wait(n - now);
    if (n > 1e9) return wait(n * 1000 - now);
    return wait(n * 1000);
  }
  return wait(duration(text));
}

/** A Go-style duration (`1h2m3.5s`, `250ms`, `20us`): ms, or undefined. */
function duration(text: string): number | undefined {
  const re = /(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const n = Number(m[1]);
    const unitMs = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 }[m[2] as 'h'];
    total += n * unitMs;
    matched = re.lastIndex;
  }
  return matched === text.length && matched > 0 ? total : undefined;
}

/** `Retry-After`: delta seconds or an HTTP date. */
function retryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return wait(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : wait(at - now);
}

/** A wait in ms, bounded to [0, a day]; undefined for anything else. */
function wait(ms: number | undefined): number | undefined {
  if (ms === undefined || !Number.isFinite(ms)) return undefined;
  return Math.min(MAX_WAIT_MS, Math.max(0, Math.ceil(ms)));
}

function seconds(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+(\.\d+)?$/.test(value.trim())) return undefined;
  return wait(Number(value) * 1000);
}

function count(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  const n = Number(value);
  return n <= MAX_COUNT ? n : undefined;
}

/** `100, 100;w=60` (draft-6 limit with a policy list): its first number. */
function firstItem(value: string | undefined): string | undefined {
  return value?.split(/[,;]/)[0];
}

/** Drops undefined fields, so `{ ...a, ...b }` never overwrites a value with undefined. */
function clean(o: Record<string, number | undefined>): UpstreamLimits {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as UpstreamLimits;
}

/** A Structured Field list of items with parameters, as much of RFC 9651 as the RateLimit fields use; malformed items are skipped. */
function sfList(text: string): Array<{ name: string; params: Map<string, string> }> {
  const out: Array<{ name: string; params: Map<string, string> }> = [];
  for (const raw of splitOutsideQuotes(text, ',')) {
    const [head, ...rest] = splitOutsideQuotes(raw, ';').map((s) => s.trim());
    if (head === undefined || head === '') continue;
    const name = head.startsWith('"') && head.endsWith('"') && head.length >= 2 ? head.slice(1, -1) : head;
    const params = new Map<string, string>();
    for (const p of rest) {
      const eq = p.indexOf('=');
      if (eq > 0) params.set(p.slice(0, eq).trim(), p.slice(eq + 1).trim());
    }
    out.push({ name, params });
  }
  return out;
}

function splitOutsideQuotes(text: string, sep: string): string[] {
  const parts: string[] = [];
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\\' && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (c === sep && !quoted) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}
