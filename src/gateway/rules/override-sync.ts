/** Rules' overrides shared through Redis hashes. */
/**
 * Read whole at start and on every (re)connection, each change heard on `<hash>:changed` and read again, and written
 * by the admin API with HSET/HDEL then PUBLISH.
 */
import { ChangeChannels, changeChannel, type ChangeSubscriber } from './change-channels.js';
import type { RuleOverrides } from './rule-overrides.js';

/** The Redis commands the overrides need (an ioredis client has them). */
export interface OverrideClient {
  hgetall(key: string): Promise<Record<string, string>>;
  hget(key: string, field: string): Promise<string | null>;
  hset(key: string, field: string, value: string): Promise<unknown>;
  hdel(key: string, field: string): Promise<unknown>;
  publish(channel: string, message: string): Promise<unknown>;
}

/** Told of a hash entry a rule refused (it stays out; the rest apply). */
export type RefusedEntry = (hash: string, rule: string, pattern: string, why: string) => void;

/**
 * A hash value as stored: JSON (`"pro"`, `{"per-minute":"600/1m"}`), or
 * plain text for what `redis-cli HSET HASH KEY pro` writes.
 */
function parseStoredValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The override hashes of the running rules, on the store's Redis. One
 * subscriber connection serves every hash; after a reload the new rules
 * take the place of the old ones of the same name.
 */
export class OverrideSync {
  /** hash → rule name → its overrides. */
  private readonly followers = new Map<string, Map<string, RuleOverrides>>();
  private readonly channels: ChangeChannels;
  private readonly rereads: ReturnType<typeof setInterval> | undefined;

  /**
   * @param rereadEveryMs - also read every hash whole this often (0: only on a change heard or a reconnection). On a
   *   Redis Cluster the subscriber moves to another node when its node goes away, without a reconnection to tell of
   *   it, and a change published meanwhile is lost: the periodic read bounds how long such a change waits.
   */
  constructor(
    private readonly client: OverrideClient,
    openSubscriber: () => ChangeSubscriber,
    private readonly refused: RefusedEntry,
    rereadEveryMs = 0,
  ) {
    this.channels = new ChangeChannels(openSubscriber, {
      heard: (hash, message) => {
        if (message === '') void this.reload(hash);
        else void this.reloadOne(hash, message);
      },
      reread: () => this.reloadAll(),
    });
    this.rereads = rereadEveryMs > 0 ? setInterval(() => this.reloadAll(), rereadEveryMs).unref() : undefined;
  }

  private reloadAll(): void {
    for (const hash of this.followers.keys()) void this.reload(hash);
  }

  /** Keeps `overrides` (of rule `rule`) in step with its hash, from now on. */
  follow(rule: string, overrides: RuleOverrides): void {
    const hash = overrides.redisHash;
    if (hash === undefined || this.channels.closed) return;
    let rules = this.followers.get(hash);
    if (rules === undefined) {
      rules = new Map();
      this.followers.set(hash, rules);
    }
    rules.set(rule, overrides);
    this.channels.follow(hash);
    void this.reload(hash, [[rule, overrides]]);
  }

  /** Forgets the rules not in `names` (dropped by a reload). */
  retain(names: ReadonlySet<string>): void {
    for (const rules of this.followers.values()) for (const name of [...rules.keys()]) if (!names.has(name)) rules.delete(name);
  }

  /**
   * Writes `value` (undefined: removes the entry) for `pattern` in `hash`
   * and announces it, so every host reads it again; this host applies it at
   * once too.
   */
  async write(hash: string, pattern: string, value: unknown): Promise<void> {
    if (value === undefined) await this.client.hdel(hash, pattern);
    else await this.client.hset(hash, pattern, JSON.stringify(value));
    await this.client.publish(changeChannel(hash), pattern);
    this.apply(hash, pattern, value);
  }

  /** Closes the subscriber connection (and stops the periodic reads). */
  close(): void {
    clearInterval(this.rereads);
    this.channels.close();
  }

  private async reload(hash: string, only?: Array<[string, RuleOverrides]>): Promise<void> {
    let all: Record<string, string>;
    try {
      all = await this.client.hgetall(hash);
    } catch {
      // Redis away: the entries in force stay; the next (re)connection reads the hash again.
      return;
    }
    const entries = new Map(Object.entries(all).map(([pattern, text]) => [pattern, parseStoredValue(text)]));
    for (const [rule, overrides] of only ?? this.followers.get(hash) ?? []) {
      for (const [pattern, why] of overrides.replace(entries, 'redis')) this.refused(hash, rule, pattern, why);
    }
  }

  private async reloadOne(hash: string, pattern: string): Promise<void> {
    let text: string | null;
    try {
      text = await this.client.hget(hash, pattern);
    } catch {
      return;
    }
    this.apply(hash, pattern, text === null ? undefined : parseStoredValue(text));
  }

  private apply(hash: string, pattern: string, value: unknown): void {
    for (const [rule, overrides] of this.followers.get(hash) ?? []) {
      if (value === undefined) {
        overrides.remove(pattern);
        continue;
      }
      try {
        overrides.put(pattern, value, 'redis');
      } catch (error) {
        this.refused(hash, rule, pattern, (error as Error).message);
      }
    }
  }
}
