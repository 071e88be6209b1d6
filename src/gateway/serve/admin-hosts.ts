/** The admin listener's Host check (`admin.hosts`): a page on another site that rebinds its own name to the admin address sends that name as Host, so a listener that knows its names refuses it. */
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
  if (name === 'localhost' || isIP(name) !== 0) return true;
  for (const allowed of hosts) {
    if (allowed.startsWith('*.') ? name.endsWith(allowed.slice(1)) && name.length > allowed.length - 1 : name === allowed) return true;
  }
  return false;
}

/** The name of a Host value, lower case, without its port or an IPv6 literal's brackets, and without a trailing dot. */
function hostName(host: string): string {
  const lower = host.trim().toLowerCase();
  const name = lower.startsWith('[') ? lower.slice(1, lower.indexOf(']') >>> 0) : lower.replace(/:\d*$/, '');
  return name.endsWith('.') ? name.slice(0, -1) : name;
}
