/** Reloads the rate limit service's YAML (a file, or every file of a directory) on change and on SIGHUP; a broken file is logged and the last good config stays. */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { ErrorCode, isFloodgateError } from '../../errors.js';
import { LinkWatch } from '../config/link-watch.js';
import type { GatewayLogger } from '../serve/log.js';
import type { GatewayMetrics } from '../serve/metrics.js';
import { loadRlsConfig, rlsConfigFiles, type RlsConfig } from './rls-config.js';

/** Editors save by writing a temporary file and renaming it; wait for the burst of events to end. */
const DEBOUNCE_MS = 150;

/** Watches the rate limit config and hands each good version to `apply`. */
export class RlsReloader {
  private watcher: LinkWatch | undefined;
  private chain: Promise<void> = Promise.resolve();
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
    process.on('SIGHUP', this.onSignal);
    const before = await digestOf(this.path).catch(() => undefined);
    const isDir = (await stat(this.path)).isDirectory();
    // Directories, not files: a rename-on-save replaces a file's inode, which would end a watch on it, and a ConfigMap
    // update renames a link (`..data`) that each file's name goes through. A directory also counts a YAML file added.
    this.watcher = new LinkWatch({
      files: () => rlsConfigFiles(this.path),
      ...(isDir ? { dir: { path: this.path, names: /\.ya?ml$/i } } : {}),
      onChange: () => void this.reload('file change'),
      onError: (error) => this.log.warn({ path: this.path, error: error.message }, 'rate limit config watch failed; SIGHUP still reloads'),
      debounceMs: DEBOUNCE_MS,
    });
    await this.watcher.start();
    // A change between the first reading and the watch would go unseen: look once more now that the watch runs.
    const now = await digestOf(this.path).catch(() => undefined);
    if (now !== before) this.watcher.recheck();
    else this.lastDigest = now;
  }

  /** Stops watching. */
  stop(): void {
    process.off('SIGHUP', this.onSignal);
    this.watcher?.stop();
  }

  /** Loads and applies the config now; reloads run one after another. */
  reload(trigger: 'SIGHUP' | 'file change'): Promise<void> {
    this.chain = this.chain.then(() => this.run(trigger));
    return this.chain;
  }

  private readonly onSignal = (): void => void this.reload('SIGHUP');

  private async run(trigger: 'SIGHUP' | 'file change'): Promise<void> {
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
