/** The one name a rule's policy goes by. */
/**
 * In the RateLimit headers, in a refusal's `violated-policies`, and in the admin API.
 */
import { formatWindow } from '../../http/index.js';
import type { KeySettings, PolicySettings } from './settings.js';

/**
 * A policy's name: its own, or the name HttpLimiter gives an unnamed policy
 * (`100-per-1d`, `5000-per-month`). The config refuses two policies of a
 * rule with one name, since `serve` could not tell them apart in headers.
 */
export function policyName(p: PolicySettings): string {
  return p.name ?? `${p.limit}-per-${p.calendar ? p.calendar.unit : formatWindow(p.windowMs)}`;
}

/** How a key source reads in messages and labels: `ip`, `header:x-api-key`, `header:x-api-key,ip`, `global`. */
export function keyLabel(key: KeySettings): string {
  return key.kind === 'header' ? `header:${key.header}${key.fallbackToIp ? ',ip' : ''}` : key.kind;
}
