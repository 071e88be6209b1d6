/** Config reloads on SIGHUP and on file change. */
/**
 * Read, validate, apply; a bad file is logged and the last good config stays in force.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isFloodgateError } from '../../index.js';
import { parseConfigText, type SettingsOverrides } from './config-file.js';
import { ReloadLoop, type ReloadTrigger } from './reload-loop.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { GatewayMetrics } from '../runtime/metrics.js';
import type { GatewaySettings } from './settings.js';

/** Options of {@link ConfigReloader}. */
export interface ReloaderOptions {
  /** The config file. */
  readonly file: string;
  /** The CLI's settings, applied over the file's on every reload. */
  readonly overrides: SettingsOverrides;
  /** Applies validated settings; throws to refuse them (the old ones stay). */
  readonly apply: (settings: GatewaySettings) => void;
  /** Logger. */
  readonly log: GatewayLogger;
  /** Metrics (`floodgate_config_reloads_total`). */
  readonly metrics: GatewayMetrics;
  /** Also reload when the file changes. */
  readonly watch: boolean;
  /** The text the running config was read from, so an unchanged file is not reapplied. */
  readonly initialText?: string;
}

/** Reloads the config on SIGHUP and (optionally) when the file changes. */
export class ConfigReloader {
  private readonly loop: ReloadLoop;
  private lastHash: string | undefined;

  /** @param options - see {@link ReloaderOptions} */
  constructor(private readonly options: ReloaderOptions) {
    if (options.initialText !== undefined) this.lastHash = hash(options.initialText);
    const { file, log } = options;
    this.loop = new ReloadLoop({
      run: (trigger) => this.run(trigger),
      watch: options.watch
        ? {
            files: async () => [file],
            onError: (error) => log.warn({ file, error: error.message }, 'config file watch failed; SIGHUP still reloads'),
          }
        : undefined,
    });
  }

  /** Starts listening for SIGHUP and file changes; resolves once the watches are set up. */
  async start(): Promise<void> {
    await this.loop.start();
    // The file was read before the watch began: a change in between would go unseen, so compare once more.
    if (this.lastHash !== undefined) this.loop.recheck();
  }

  /** Stops listening. */
  stop(): void {
    this.loop.stop();
  }

  /**
   * Reads the file and applies it. Reloads run one after another. A file
   * change that leaves the content as it was is ignored; SIGHUP always
   * re-applies.
   */
  reload(trigger: ReloadTrigger): Promise<void> {
    return this.loop.reload(trigger);
  }

  private async run(trigger: ReloadTrigger): Promise<void> {
    const { file, log, metrics } = this.options;
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      // Mid-rename the file can be briefly missing; the rename's own event follows.
      if (trigger === 'file change') return;
      metrics.reload(false);
      log.error({ file, error: (error as Error).message }, 'config reload failed: cannot read the file; keeping the last good config');
      return;
    }
    const digest = hash(text);
    if (trigger === 'file change' && digest === this.lastHash) return;
    try {
      const settings = await parseConfigText(text, file, this.options.overrides, { requireRules: true });
      this.options.apply(settings);
      this.lastHash = digest;
      metrics.reload(true);
      log.info({ file, trigger }, 'config reloaded');
    } catch (error) {
      // Remember the bad text too, so the watcher does not report the same error on every touch.
      this.lastHash = digest;
      metrics.reload(false);
      const code = isFloodgateError(error) ? error.code : undefined;
      log.error({ file, trigger, code, error: (error as Error).message }, 'config reload failed; keeping the last good config');
    }
  }
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
