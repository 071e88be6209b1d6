/** Watches config files through the directories that hold them and every symlink on the way to them. */
/**
 * That way an edit, a rename-on-save and a Kubernetes ConfigMap update (a `..data` link renamed over) are all seen.
 */
import { watch, type FSWatcher } from 'node:fs';
import { lstat, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';

/** Linux's own limit on the links one lookup follows (ELOOP past it). */
const MAX_LINKS = 40;

/**
 * Every path whose change would change what `path` reads: `path` itself (in
 * its real directory), each symlink met on the way from it to the file (the
 * links of its own name, and of directories named in their targets, such as
 * a ConfigMap's `..data`), and the file reached. Links among the directories
 * above `path` (`/var/run`) are resolved, not followed: they are the
 * system's, not the config's. A missing entry ends the list (a watch on its
 * directory sees it appear).
 */
export async function pathHops(path: string): Promise<string[]> {
  const hops: string[] = [];
  let base: string;
  try {
    base = await realpath(dirname(resolve(path)));
  } catch {
    return [resolve(path)];
  }
  let rest = [basename(path)];
  let links = 0;
  while (rest.length > 0) {
    const next = join(base, rest.shift()!);
    let isLink: boolean;
    try {
      isLink = (await lstat(next)).isSymbolicLink();
    } catch {
      hops.push(next);
      return hops;
    }
    if (!isLink) {
      base = next;
      continue;
    }
    hops.push(next);
    links += 1;
    if (links > MAX_LINKS) return hops;
    let target: string;
    try {
      target = await readlink(next);
    } catch {
      return hops;
    }
    // The target's components are walked one by one: any of them may be a link itself (`..data` in `..data/rules.yaml`).
    rest = [
      ...resolve(base, target)
        .split(sep)
        .filter((p) => p !== ''),
      ...rest,
    ];
    base = sep;
  }
  hops.push(base);
  return hops;
}

/** Options of {@link LinkWatch}. */
export interface LinkWatchOptions {
  /** The files to follow, asked again after every change (a swap can add files or move them); may throw while a swap is half done. */
  readonly files: () => Promise<readonly string[]>;
  /** A directory whose entries count when their name matches (a directory of YAML files gaining one). */
  readonly dir?: { readonly path: string; readonly names: RegExp };
  /** Called once a burst of relevant events has ended. */
  readonly onChange: () => void;
  /** Told when a directory cannot be watched or its watch fails. */
  readonly onError: (error: Error) => void;
  /** Quiet time that ends a burst, ms. */
  readonly debounceMs: number;
}

interface Watched {
  readonly watcher: FSWatcher;
  names: Set<string>;
}

/**
 * Watches, without polling, the directories that hold the files and the
 * links on their way (see {@link pathHops}); an event counts only when it
 * names one of those entries (or matches `dir.names` in `dir`), so other
 * files in the same directories trigger nothing. After each burst the links
 * are followed again and the watches moved to where they now lead.
 */
export class LinkWatch {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /** @param options - see {@link LinkWatchOptions} */
  constructor(private readonly options: LinkWatchOptions) {}

  /** Sets up the watches. */
  async start(): Promise<void> {
    await this.follow();
  }

  /** Closes every watch. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    for (const w of this.watched.values()) w.watcher.close();
    this.watched.clear();
  }

  private async follow(): Promise<void> {
    let files: readonly string[];
    try {
      files = await this.options.files();
    } catch {
      // Mid-swap the files can be briefly missing: keep the watches, the swap's own events follow.
      return;
    }
    const wanted = new Map<string, Set<string>>();
    const add = (dir: string, name?: string): void => {
      const names = wanted.get(dir) ?? new Set<string>();
      if (name !== undefined) names.add(name);
      wanted.set(dir, names);
    };
    if (this.options.dir !== undefined) add(resolve(this.options.dir.path));
    for (const file of files) for (const hop of await pathHops(file)) add(dirname(hop), basename(hop));
    if (this.stopped) return;
    for (const [dir, w] of this.watched) {
      if (wanted.has(dir)) continue;
      w.watcher.close();
      this.watched.delete(dir);
    }
    for (const [dir, names] of wanted) {
      const known = this.watched.get(dir);
      if (known !== undefined) known.names = names;
      else this.open(dir, names);
    }
  }

  private open(dir: string, names: Set<string>): void {
    const pattern = this.options.dir !== undefined && resolve(this.options.dir.path) === dir ? this.options.dir.names : undefined;
    try {
      const watcher = watch(dir, (_event, changed) => {
        const entry = this.watched.get(dir);
        if (changed !== null && entry?.names.has(changed) !== true && pattern?.test(changed) !== true) return;
        this.changed();
      });
      watcher.on('error', (error) => this.options.onError(error));
      this.watched.set(dir, { watcher, names });
    } catch (error) {
      // Removed since it was resolved: a swap is under way (a ConfigMap's old directory goes last), so follow the links again.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') this.changed();
      else this.options.onError(error as Error);
    }
  }

  /**
   * Reports a change once the quiet time passes, as an event would: for a
   * change that may have come between reading the files and {@link start}.
   */
  recheck(): void {
    if (!this.stopped) this.changed();
  }

  /** Something relevant moved: once the burst ends, follow the links again and report. */
  private changed(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.follow().then(() => this.stopped || this.options.onChange()), this.options.debounceMs);
  }
}
