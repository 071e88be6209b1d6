/** What the admin API reads from a running gateway. */
/**
 * Its rules in force, the most-limited keys, and, on Redis, the announcement of resets and unblocks to the other
 * hosts.
 */
import type { RuleSet } from '../rules/rule-set.js';
import type { GatewaySettings } from '../config/settings.js';
import type { AdminApiSource } from './admin-api.js';
import { AdminBroadcast } from './admin-broadcast.js';
import type { AdminPubSub } from '../rules/change-channels.js';
import { LimitedKeys } from './limited-keys.js';
import type { OverrideSync } from '../rules/override-sync.js';

/** The parts of a gateway the admin API reads; functions, since a reload replaces the rules and settings. */
export interface AdminParts {
  /** The compiled rules in force. */
  rules(): RuleSet;
  /** The settings in force (their rules are in the same order). */
  settings(): GatewaySettings;
  /** The refusals of the last minutes; undefined while the API is off. */
  readonly limited: LimitedKeys | undefined;
  /** The Redis store's publish and subscribe; undefined without Redis. */
  readonly pubsub: AdminPubSub | undefined;
  /** Writes to rules' override hashes; undefined without Redis. */
  readonly overrideSync?: OverrideSync | undefined;
}

/**
 * The admin API's source over a gateway, and its broadcast when there is
 * one (to close on shutdown). Every host with the API on hears the others'
 * resets and unblocks: its in-memory blocks are its own, and would refuse the
 * key until they run out (a block `"forever"`: until a restart).
 */
export function adminSource(parts: AdminParts): { source: AdminApiSource; broadcast: AdminBroadcast | undefined } {
  const forget = (rule: string, key: string): void => {
    for (const r of parts.rules().rules) if (r.name === rule) for (const limiter of r.limiters) limiter.forgetMemoryBlock(key);
  };
  const forgetAll = (): void => {
    for (const r of parts.rules().rules) for (const limiter of r.limiters) limiter.forgetMemoryBlocks();
  };
  const broadcast =
    parts.pubsub === undefined || parts.limited === undefined
      ? undefined
      : new AdminBroadcast(parts.pubsub, parts.settings().store.prefix, { heard: forget, missed: forgetAll });
  const source: AdminApiSource = {
    rules: () => {
      const settings = parts.settings().rules;
      return parts.rules().rules.map((rule, i) => ({ settings: settings[i]!, limiters: rule.limiters, overrides: rule.overrides }));
    },
    limited: parts.limited ?? new LimitedKeys(),
    overrides: {
      plans: () => parts.settings().plans,
      ...(parts.overrideSync === undefined ? {} : { write: parts.overrideSync.write.bind(parts.overrideSync) }),
    },
    ...(broadcast === undefined ? {} : { changed: (rule: string, key: string) => void broadcast.announce(rule, key) }),
  };
  return { source, broadcast };
}
