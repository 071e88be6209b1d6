/** A rule key's `allowList: { redis: NAME, ... }`. */
/**
 * The Redis set of known keys and the bounds of the cache in front of it.
 */
import { describeValue } from '../../core/describe-value.js';
import { InvalidValue, parseMs, parsePositiveInt } from './values.js';
import { DEFAULT_KNOWN_KEYS, type KnownKeysSettings } from './settings.js';
import { mapping, type Cursor, type Path } from './yaml-cursor.js';

const KNOWN_KEYS_FIELDS = ['redis', 'knownFor', 'unknownFor', 'cacheSize', 'maxLookups'] as const;
/** Longest `knownFor`: a removed key is still admitted this long, so an hour is the most that stays an allow list. */
const MAX_KNOWN_FOR_MS = 3_600_000;
/** Shortest `knownFor`: below it every request of a busy key would be a Redis call. */
const MIN_KNOWN_FOR_MS = 100;
/** Most keys of each cache table: about 100 bytes each, so 100 MB at most per table. */
const MAX_CACHE_SIZE = 1_000_000;
/** Most keys under way at once. */
const MAX_LOOKUPS = 100_000;
const EXAMPLE = 'e.g. allowList: { redis: "fg:known-keys", knownFor: 30s, unknownFor: 5s }';

/**
 * Parses the mapping form of a key's `allowList`. `unknownFor` may not
 * exceed `knownFor`: a new key should not wait longer to be admitted than a
 * removed one waits to be refused.
 */
export function knownKeysSettings(c: Cursor, path: Path, value: unknown): KnownKeysSettings {
  const o = mapping(c, path, value, KNOWN_KEYS_FIELDS);
  if (o.redis === undefined)
    c.fail(path, `needs redis, the name of the Redis set that lists the known keys (${EXAMPLE}); for a file write allowList: ./keys.txt.`);
  const set = c.at([...path, 'redis'], () => {
    if (typeof o.redis !== 'string' || o.redis.trim() === '' || o.redis.length > 512)
      throw new InvalidValue(`must be the name of a Redis set, e.g. "fg:known-keys"; got ${describeValue(o.redis)}.`);
    return o.redis;
  });
  const knownForMs =
    o.knownFor === undefined
      ? DEFAULT_KNOWN_KEYS.knownForMs
      : c.at([...path, 'knownFor'], () => {
          const ms = parseMs(o.knownFor);
          if (ms < MIN_KNOWN_FOR_MS || ms > MAX_KNOWN_FOR_MS)
            throw new InvalidValue(
              `must be from ${MIN_KNOWN_FOR_MS}ms to 1h: a removed key is admitted this long after SREM; got ${describeValue(o.knownFor)}.`,
            );
          return ms;
        });
  const unknownForMs =
    o.unknownFor === undefined
      ? Math.min(DEFAULT_KNOWN_KEYS.unknownForMs, knownForMs)
      : c.at([...path, 'unknownFor'], () => {
          const ms = parseMs(o.unknownFor, true);
          if (ms > knownForMs)
            throw new InvalidValue(
              `must not be longer than knownFor (${knownForMs} ms): a key added with SADD waits this long to be admitted; got ${describeValue(o.unknownFor)}.`,
            );
          return ms;
        });
  const cacheSize =
    o.cacheSize === undefined
      ? DEFAULT_KNOWN_KEYS.cacheSize
      : c.at([...path, 'cacheSize'], () => parsePositiveInt(o.cacheSize, MAX_CACHE_SIZE));
  const maxLookups =
    o.maxLookups === undefined
      ? DEFAULT_KNOWN_KEYS.maxLookups
      : c.at([...path, 'maxLookups'], () => parsePositiveInt(o.maxLookups, MAX_LOOKUPS));
  return { set, knownForMs, unknownForMs, cacheSize, maxLookups };
}
