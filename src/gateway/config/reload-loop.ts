/** What the config reloaders share (the gateway's file and the rate limit service's YAML). */
/**
 * SIGHUP, a watch of the files through their links, and reloads run one after another.
 */
import { LinkWatch, type LinkWatchOptions } from './link-watch.js';

/** What started a reload. */
export type ReloadTrigger = 'SIGHUP' | 'file change';

/** Editors save by writing a temporary file and renaming it; wait for the burst of events to end. */
const DEBOUNCE_MS = 150;

/** Options of {@link ReloadLoop}. */
export interface ReloadLoopOptions {
  /** One reload: read, check, apply (or log why not). */
  readonly run: (trigger: ReloadTrigger) => Promise<void>;
  /** The files to watch; undefined reloads on SIGHUP only. */
  readonly watch?: Omit<LinkWatchOptions, 'onChange' | 'debounceMs'> | undefined;
}

/** Runs a reloader's reloads on SIGHUP and on file change, one after another. */
export class ReloadLoop {
  private watcher: LinkWatch | undefined;
  private chain: Promise<void> = Promise.resolve();

  /** @param options - see {@link ReloadLoopOptions} */
  constructor(private readonly options: ReloadLoopOptions) {}

  /** Listens for SIGHUP and starts the watch; resolves once the watches are set up. */
  async start(): Promise<void> {
    process.on('SIGHUP', this.onSignal);
    if (this.options.watch === undefined) return;
    // Directories, not files: a rename-on-save replaces a file's inode, which would end a watch on it, and a ConfigMap
    // update renames a link (`..data`) that each file's name goes through.
    this.watcher = new LinkWatch({ ...this.options.watch, onChange: () => void this.reload('file change'), debounceMs: DEBOUNCE_MS });
    await this.watcher.start();
  }

  /** Looks at the files once more, as a change would: for what changed between the first reading and the watch. */
  recheck(): void {
    this.watcher?.recheck();
  }

  /** Stops listening. */
  stop(): void {
    process.off('SIGHUP', this.onSignal);
    this.watcher?.stop();
  }

  /** Runs a reload after those already under way. */
  reload(trigger: ReloadTrigger): Promise<void> {
    this.chain = this.chain.then(() => this.options.run(trigger));
    return this.chain;
  }

  private readonly onSignal = (): void => void this.reload('SIGHUP');
}
