/** The admin listener's Host check (`admin.hosts`). */
/**
 * A page on another site that rebinds its own name to the admin address sends that name as Host, so a listener that
 * knows its names refuses it.
 */
import { isIP } from 'node:net';

/**
 * Whether a request whose Host header is `host` may be answered, when the
 * admin listener's names are `hosts` (lower case; `*.example.com` for the
 * names under example.com). An IP literal and `localhost` are always
 * accepted (orchestrator probes and scrapers by address, curl on the
 * machine), and so is a request without a Host (no browser sends one).
 */
export function adminHostAllowed(host: string | undefined, hosts: readonly string[]): boolean {
  if (host === undefined || host === '') return true;
  const name = hostName(host);
  if (name === undefined) return false;
  if (name === 'localhost' || isIP(name) !== 0) return true;
  for (const allowed of hosts) {
    if (allowed.startsWith('*.') ? name.endsWith(allowed.slice(1)) && name.length > allowed.length - 1 : name === allowed) return true;
  }
  return false;
}

/** `[IPv6]` or `[IPv6]:PORT`, nothing before or after (RFC 9110 Host: uri-host [":" port]). */
const BRACKETED = /^\[([0-9a-f:.]+)\](?::\d*)?$/;
/** An IPv4 address or a registered name (RFC 3986 reg-name: unreserved, sub-delims, percent-encoded), then an optional port. */
const NAMED = /^([a-z0-9\-._~!$&'()*+,;=%]+)(?::\d*)?$/;

/**
 * The name of a Host value, lower case, without its port or an IPv6
 * literal's brackets, and without a trailing dot; undefined when the value
 * is not a Host at all. Parsed whole: `[::1]evil.com` is no IPv6 literal
 * (a check of the bracketed part alone would take it for one and answer a
 * page that names evil.com), and `a b` or `x:y:z` is no name.
 */
function hostName(host: string): string | undefined {
  const lower = host.trim().toLowerCase();
  if (lower.startsWith('[')) {
    const literal = BRACKETED.exec(lower)?.[1];
    return literal !== undefined && isIP(literal) === 6 ? literal : undefined;
  }
  const name = NAMED.exec(lower)?.[1];
  if (name === undefined) return undefined;
  return name.endsWith('.') ? name.slice(0, -1) : name;
}
