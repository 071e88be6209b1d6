/** Reloads the rate limit service's YAML (a file, or every file of a directory) on change and on SIGHUP; a broken file is logged and the last good config stays. */
import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { ErrorCode, isFloodgateError } from '../../errors.js';
import type { GatewayLogger } from '../serve/log.js';
import type { GatewayMetrics } from '../serve/metrics.js';
import { loadRlsConfig, type RlsConfig } from './rls-config.js';

/** Editors save by writing a temporary file and renaming it; wait for the burst of events to end. */
const DEBOUNCE_MS = 150;

/** Watches the rate limit config and hands each good version to `apply`. */
export class RlsReloader {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();

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
    const isDir = (await stat(this.path)).isDirectory();
    // A file is watched through its directory: a rename-on-save replaces the file's inode, which would end a watch on it.
    const dir = isDir ? this.path : dirname(this.path);
    const name = basename(this.path);
    try {
      this.watcher = watch(dir, (_event, changed) => {
        if (changed !== null && (isDir ? !/\.ya?ml$/i.test(changed) : changed !== name)) return;
        clearTimeout(this.timer);
        this.timer = setTimeout(() => void this.reload('file change'), DEBOUNCE_MS);
      });
      this.watcher.on('error', (error) => this.log.warn({ error: error.message }, 'rate limit config watch failed; SIGHUP still reloads'));
    } catch (error) {
      this.log.warn({ error: (error as Error).message }, 'cannot watch the rate limit config; SIGHUP still reloads');
    }
  }

  /** Stops watching. */
  stop(): void {
    process.off('SIGHUP', this.onSignal);
    this.watcher?.close();
    clearTimeout(this.timer);
  }

  /** Loads and applies the config now; reloads run one after another. */
  reload(trigger: 'SIGHUP' | 'file change'): Promise<void> {
    this.chain = this.chain.then(() => this.run(trigger));
    return this.chain;
  }

  private readonly onSignal = (): void => void this.reload('SIGHUP');

  private async run(trigger: 'SIGHUP' | 'file change'): Promise<void> {
    try {
      const config = await loadRlsConfig(this.path);
      this.apply(config);
      this.metrics.reload(true);
      this.log.info({ path: this.path, trigger, domains: [...config.domains.keys()] }, 'rate limit config reloaded');
    } catch (error) {
      const code = isFloodgateError(error) ? error.code : undefined;
      // Mid-rename a file can be briefly missing; the rename's own event follows.
      if (trigger === 'file change' && code === ErrorCode.CONFIG_UNREADABLE) return;
      this.metrics.reload(false);
      this.log.error(
        { path: this.path, trigger, code, error: (error as Error).message },
        'rate limit config reload failed; keeping the last good config',
      );
    }
  }
}
