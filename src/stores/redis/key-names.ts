/** Redis key layout: every key of one limiter key shares one hash tag. */
/**
 * So all keys of one limiter key are in one slot, and one script can touch them all.
 */
import { clusterHashTag } from './key-slot.js';

// A lone surrogate has no UTF-8 form: clients send U+FFFD, so two such keys would collide.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// A key that could break the hash tag ({ or }), pass for an encoded key (leading ~), is empty
// ("{}" is no hash tag) or holds a lone surrogate is sent encoded instead.
const NEEDS_ENCODING = new RegExp(`^$|^~|[{}]|${LONE_SURROGATE.source}`);

/**
 * The hash tag of a store key: the key itself when it is safe inside `{…}`,
 * else `~` + base64url of its UTF-8 bytes. Keys with a lone surrogate, which
 * UTF-8 cannot represent (two would collide as U+FFFD), use `~~` + base64url
 * of their UTF-16 code units. base64url has no `~`, and plain keys never start
 * with one, so two different keys never share a tag.
 */
export function hashTag(key: string): string {
  if (!NEEDS_ENCODING.test(key)) return key;
  if (LONE_SURROGATE.test(key)) return `~~${Buffer.from(key, 'utf16le').toString('base64url')}`;
  return `~${Buffer.from(key, 'utf8').toString('base64url')}`;
}

/** The Redis keys that hold one store key's state. */
export interface RedisKeys {
  /** Hash with the algorithm's fields and `b`, the block end (ms; -1 = until reset). */
  readonly state: string;
  /** List of unit timestamps, oldest first; used by the sliding log only. */
  readonly log: string;
  /** Sorted set of concurrency slots: owner ids scored by expiry (ms); used by concurrency limits only. */
  readonly slots: string;
}

/**
 * The Redis keys of a store key (`operation.key`, prefix included).
 *
 * A store key without a Redis hash tag gets its own slot:
 * `{<key>}`, `{<key>}:l` and `{<key>}:s` (concurrency slots), e.g.
 * `{fg:fixed-window:10:1000:0:alice}` (the
 * key encoded as {@link hashTag} says when it holds `{`, `}`, a leading `~` or
 * a lone surrogate, or is empty).
 *
 * A store key that holds a hash tag — a `{`, then later a `}`, with at least
 * one character between, Redis's own rule — hashes by that tag, so keys
 * sharing a tag share a slot and one composite can span them: `{<tag>}#<key>`,
 * `{<tag>}l#<key>` and `{<tag>}s#<key>`, e.g. `fg:…:{org9}:u1` →
 * `{org9}#fg:…:{org9}:u1`. A key with a lone surrogate uses
 * `~<base64url of its UTF-16>` in place of `#<key>`. What follows the first
 * `}` tells the layouts apart (nothing, `:l`, `:s`, `#`, `~`, `l#`, `l~`,
 * `s#`, `s~`), so two store keys never share a Redis key.
 *
 * Useful to inspect or delete a key's state by hand; a TTL on each lets Redis
 * drop it once it no longer limits anything.
 */
export function redisKeys(key: string): RedisKeys {
  const state = redisStateKey(key);
  const tag = clusterHashTag(key);
  if (tag !== undefined) {
    const rest = state.slice(tag.length + 2);
    return { state, log: `{${tag}}l${rest}`, slots: `{${tag}}s${rest}` };
  }
  return { state, log: `${state}:l`, slots: `${state}:s` };
}

/** {@link redisKeys}'s `state` alone: the one key most calls need, without making the other two. */
export function redisStateKey(key: string): string {
  const tag = clusterHashTag(key);
  if (tag !== undefined) {
    const rest = LONE_SURROGATE.test(key) ? `~${Buffer.from(key, 'utf16le').toString('base64url')}` : `#${key}`;
    return `{${tag}}${rest}`;
  }
  return `{${hashTag(key)}}`;
}
