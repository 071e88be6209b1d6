/** The one name a rule's policy goes by. */
/**
 * In the RateLimit headers, in a refusal's `violated-policies`, and in the admin API.
 */
import { formatWindow } from '../../http/index.js';
import type { KeyPartSettings, KeySettings, PolicySettings } from './settings.js';

/**
 * A policy's name: its own, or the name HttpLimiter gives an unnamed policy
 * (`100-per-1d`, `5000-per-month`). The config refuses two policies of a
 * rule with one name, since `serve` could not tell them apart in headers.
 */
export function policyName(p: PolicySettings): string {
  return p.name ?? `${p.limit}-per-${p.calendar ? p.calendar.unit : formatWindow(p.windowMs)}`;
}

/**
 * How a key source reads in messages and labels, as it is written: `ip`, `header:x-api-key`,
 * `header:x-api-key,ip`, `cookie:sid`, `query:api_key`, `path:2`, `path:{user}`, `jwt:sub`, `global`, and
 * compounds as `header:x-api-key + path`.
 */
export function keyLabel(key: KeySettings | KeyPartSettings): string {
  switch (key.kind) {
    case 'header':
      return `header:${key.header}${key.fallbackToIp ? ',ip' : ''}`;
    case 'cookie':
    case 'query':
      return `${key.kind}:${key.name}`;
    case 'path':
      return key.segment !== undefined ? `path:${key.segment}` : key.group !== undefined ? `path:{${key.group}}` : 'path';
    case 'jwt':
      return `jwt:${key.claim}`;
    case 'compound':
      return key.parts.map(keyLabel).join(' + ');
    default:
      return key.kind;
  }
}
