/** Reloads the rate limit service's YAML (a file, or every file of a directory) on change and on SIGHUP. */
/**
 * A broken file is logged and the last good config stays.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { ErrorCode, isFloodgateError } from '../../index.js';
import { ReloadLoop, type ReloadTrigger } from '../config/reload-loop.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { GatewayMetrics } from '../runtime/metrics.js';
import { loadRlsConfig, rlsConfigFiles, type RlsConfig } from './rls-config.js';

/** Watches the rate limit config and hands each good version to `apply`. */
export class RlsReloader {
  private loop: ReloadLoop | undefined;
  /** The files and contents last applied (or refused), or read as the watch began; undefined: the next change applies whatever it finds. */
  private lastDigest: string | undefined;

  /**
   * @param path - the file or directory
   * @param apply - takes a config that loaded without error
   * @param log - logger
   * @param metrics - `floodgate_config_reloads_total`
   */
  constructor(
    private readonly path: string,
    private readonly apply: (config: RlsConfig) => void,
    private readonly log: GatewayLogger,
    private readonly metrics: GatewayMetrics,
  ) {}

  /** Starts watching (and listening for SIGHUP). */
  async start(): Promise<void> {
    const before = await digestOf(this.path).catch(() => undefined);
    const isDir = (await stat(this.path)).isDirectory();
    // A directory also counts a YAML file added.
    this.loop = new ReloadLoop({
      run: (trigger) => this.run(trigger),
      watch: {
        files: () => rlsConfigFiles(this.path),
        ...(isDir ? { dir: { path: this.path, names: /\.ya?ml$/i } } : {}),
        onError: (error) =>
          this.log.warn({ path: this.path, error: error.message }, 'rate limit config watch failed; SIGHUP still reloads'),
      },
    });
    await this.loop.start();
    // A change between the first reading and the watch would go unseen: look once more now that the watch runs.
    const now = await digestOf(this.path).catch(() => undefined);
    if (now !== before) this.loop.recheck();
    else this.lastDigest = now;
  }

  /** Stops watching. */
  stop(): void {
    this.loop?.stop();
  }

  /** Loads and applies the config now; reloads run one after another. */
  reload(trigger: ReloadTrigger): Promise<void> {
    return this.loop?.reload(trigger) ?? this.run(trigger);
  }

  private async run(trigger: ReloadTrigger): Promise<void> {
    // A change that leaves every file as it was (an unrelated entry, an old ConfigMap directory removed) is not reapplied; SIGHUP always is.
    const digest = await digestOf(this.path).catch(() => undefined);
    if (trigger === 'file change' && digest !== undefined && digest === this.lastDigest) return;
    try {
      const config = await loadRlsConfig(this.path);
      this.apply(config);
      this.lastDigest = digest;
      this.metrics.reload(true);
      this.log.info({ path: this.path, trigger, domains: [...config.domains.keys()] }, 'rate limit config reloaded');
    } catch (error) {
      const code = isFloodgateError(error) ? error.code : undefined;
      // Mid-rename a file can be briefly missing; the rename's own event follows.
      if (trigger === 'file change' && code === ErrorCode.CONFIG_UNREADABLE) return;
      // Remember the bad version too, so the watch does not report the same error on every event.
      this.lastDigest = digest;
      this.metrics.reload(false);
      this.log.error(
        { path: this.path, trigger, code, error: (error as Error).message },
        'rate limit config reload failed; keeping the last good config',
      );
    }
  }
}

/** One hash of the files `path` names and their contents. */
async function digestOf(path: string): Promise<string> {
  const files = await rlsConfigFiles(path);
  const hash = createHash('sha256');
  for (const file of files) hash.update(`${file}\0${await readFile(file, 'utf8')}\0`);
  return hash.digest('hex');
}
