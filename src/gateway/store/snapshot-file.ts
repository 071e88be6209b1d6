/** The embedded memory store's snapshot file: read at start, written on an interval and when the gateway stops. */
/**
 * One file holds every table (the shared one, each rule's, each rate limit domain's). It is written atomically: a
 * temporary file beside it, fsync, rename, fsync of the directory; so the file is always a whole snapshot, the last
 * one or the one before. A crash loses at most one interval of counts; a restored count is never lower than it was
 * when its snapshot was taken, so a restart never admits more than the limit plus what that interval held.
 */
import { open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { checkSnapshot, ErrorCode, FloodgateError, type MemorySnapshot } from '../../index.js';
import type { GatewaySettings, SnapshotSettings } from '../config/settings.js';
import type { GatewayStore, MemoryTablesSnapshot } from '../rules/key-tables.js';
import type { GatewayLogger } from '../runtime/log.js';

/** How a process keeps its tables: one per rule and domain (a single process), or `one` (a `--workers` primary). */
export type TableLayout = 'per-rule' | 'one';

/** The `format` of the gateway's snapshot file. */
const FILE_FORMAT = 'floodgate-gateway-snapshot';
const FILE_VERSION = 1;

/**
 * The tables held in `gateway.store.snapshot.file`, laid out as this process keeps its tables (`layout`); undefined
 * without snapshots, or when there is no file yet (a first start). A file that cannot be
 * restored ends the start (FLOODGATE_INVALID_SNAPSHOT naming it) unless `onError` is `start-empty`: then it is logged
 * and moved aside (`FILE.bad-TIME`), so the next snapshot does not overwrite what may be worth looking at.
 * @throws FloodgateError INVALID_SNAPSHOT (the file's problem, and how to start anyway)
 */
export async function readSnapshotFile(
  gateway: GatewaySettings,
  log: GatewayLogger,
  layout: TableLayout,
): Promise<MemoryTablesSnapshot | undefined> {
  const settings = gateway.store.snapshot;
  if (settings === undefined) return undefined;
  let text: string;
  try {
    text = await readFile(settings.file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      log.info({ file: settings.file }, 'no memory store snapshot yet; starting with no counts');
      return undefined;
    }
    return refused(
      settings,
      log,
      new FloodgateError(ErrorCode.INVALID_SNAPSHOT, `${settings.file} cannot be read: ${(error as Error).message}`, error),
    );
  }
  try {
    const rules = gateway.rules.map((r) => r.name);
    const tables = laidOut(parseFile(text, settings.file), layout, gateway.store.prefix, rules);
    log.info({ file: settings.file, keys: keysIn(tables) }, 'memory store restored from its snapshot');
    return tables;
  } catch (error) {
    return refused(settings, log, error as FloodgateError);
  }
}

async function refused(settings: SnapshotSettings, log: GatewayLogger, error: FloodgateError): Promise<undefined> {
  if (settings.onError === 'exit')
    throw new FloodgateError(
      ErrorCode.INVALID_SNAPSHOT,
      `store.snapshotFile: ${error.message} To start with no counts instead, set store.snapshotOnError: start-empty.`,
      error,
    );
  const aside = `${settings.file}.bad-${Date.now()}`;
  await rename(settings.file, aside).catch(() => undefined);
  log.error({ file: settings.file, movedTo: aside, error: error.message }, 'memory store snapshot not restored; starting with no counts');
  return undefined;
}

function parseFile(text: string, file: string): MemoryTablesSnapshot {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new FloodgateError(ErrorCode.INVALID_SNAPSHOT, `${file} is not a whole snapshot (cut short or not JSON).`, error);
  }
  const v = value as { format?: unknown; version?: unknown; tables?: Record<string, unknown> } | null;
  if (typeof v !== 'object' || v === null || v.format !== FILE_FORMAT)
    throw new FloodgateError(ErrorCode.INVALID_SNAPSHOT, `${file} is not a floodgate gateway snapshot (no "format": "${FILE_FORMAT}").`);
  if (v.version !== FILE_VERSION)
    throw new FloodgateError(ErrorCode.INVALID_SNAPSHOT, `${file} has version ${String(v.version)}; this floodgate reads ${FILE_VERSION}.`);
  const t = v.tables as Partial<Record<'shared' | 'rules' | 'rls', unknown>> | undefined;
  const group = (name: 'rules' | 'rls'): Record<string, MemorySnapshot> => {
    const g = t?.[name];
    if (typeof g !== 'object' || g === null || Array.isArray(g))
      throw new FloodgateError(ErrorCode.INVALID_SNAPSHOT, `${file} has no tables.${name} mapping.`);
    return Object.fromEntries(Object.entries(g).map(([k, s]) => [k, checkSnapshot(s, `${file} (tables.${name}.${k})`)]));
  };
  return { shared: checkSnapshot(t?.shared, `${file} (tables.shared)`), rules: group('rules'), rls: group('rls') };
}

/**
 * `saved` laid out as this process keeps its tables, whichever way it was written: `one` table for a `--workers`
 * primary (every table merged: their keys never collide, each carrying its rule's name), or one table per rule for a
 * single process (the keys and sketches of each of `rules` moved from the one table to that rule's: a file a primary
 * wrote). So switching `--workers` on or off keeps the counts.
 * @param storePrefix - `store.prefix`: a rule's keys begin with `PREFIX:RULE:`
 * @param ruleNames - the config's rule names
 */
function laidOut(
  saved: MemoryTablesSnapshot,
  layout: TableLayout,
  storePrefix: string,
  ruleNames: readonly string[],
): MemoryTablesSnapshot {
  if (layout === 'one') {
    const all = [saved.shared, ...Object.values(saved.rules), ...Object.values(saved.rls)];
    if (all.length === 1) return saved;
    const shared = {
      ...saved.shared,
      takenAt: Math.max(...all.map((t) => t.takenAt)),
      entries: all.flatMap((t) => t.entries),
      sketches: all.flatMap((t) => t.sketches),
    };
    return { shared, rules: {}, rls: {} };
  }
  const lead = `${storePrefix}:`;
  const known = new Set(ruleNames);
  /** The rule whose prefix begins at `from` in `text`, when it is one of `rules`. */
  const ruleOf = (text: string, from: number): string | undefined => {
    if (from < 0 || !text.startsWith(lead, from)) return undefined;
    const end = text.indexOf(':', from + lead.length);
    const rule = end < 0 ? undefined : text.slice(from + lead.length, end);
    return rule !== undefined && known.has(rule) ? rule : undefined;
  };
  const rules = new Map<string, { entries: MemorySnapshot['entries'][number][]; sketches: MemorySnapshot['sketches'][number][] }>();
  const into = (rule: string) => {
    let r = rules.get(rule);
    if (r === undefined)
      rules.set(rule, (r = { entries: [...(saved.rules[rule]?.entries ?? [])], sketches: [...(saved.rules[rule]?.sketches ?? [])] }));
    return r;
  };
  const entries = saved.shared.entries.filter((e) => {
    const rule = ruleOf(e[0], 0);
    if (rule !== undefined) into(rule).entries.push(e);
    return rule === undefined;
  });
  // A sketch's id ends with its limiter's prefix (PREFIX:RULE:...).
  const sketches = saved.shared.sketches.filter((k) => {
    const at = k.id.indexOf(`:${lead}`);
    const rule = at < 0 ? undefined : ruleOf(k.id, at + 1);
    if (rule !== undefined) into(rule).sketches.push(k);
    return rule === undefined;
  });
  if (rules.size === 0) return saved;
  const regrouped: Record<string, MemorySnapshot> = { ...saved.rules };
  for (const [rule, r] of rules) regrouped[rule] = { ...saved.shared, entries: r.entries, sketches: r.sketches };
  return { shared: { ...saved.shared, entries, sketches }, rules: regrouped, rls: saved.rls };
}

function keysIn(tables: MemoryTablesSnapshot): number {
  const all = [tables.shared, ...Object.values(tables.rules), ...Object.values(tables.rls)];
  return all.reduce((n, s) => n + s.entries.length, 0);
}

/**
 * Writes `tables` to `file` so that a reader only ever sees a whole file: a temporary file in the same directory,
 * flushed to disk, renamed over it, and the directory flushed so the rename survives a power loss.
 */
async function writeSnapshotFile(file: string, tables: MemoryTablesSnapshot): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  const text = JSON.stringify({ format: FILE_FORMAT, version: FILE_VERSION, takenAt: Date.now(), tables });
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  const directory = await open(dirname(file), 'r').catch(() => undefined);
  // Some file systems refuse to fsync a directory; the rename is then as durable as they make it.
  await directory?.sync().catch(() => undefined);
  await directory?.close();
}

/**
 * Keeps `store`'s snapshots: writes one now (so a path that cannot be written is found at start, not at the first
 * interval), one every `everyMs`, and one when the store closes (after the drain: nothing is counted after it).
 * Returns the store with that last write in its `close`.
 * @throws the write error of the first snapshot (a directory that does not exist, no permission)
 */
export async function keepSnapshots<S extends Pick<GatewayStore, 'snapshot' | 'close'>>(
  store: S,
  settings: SnapshotSettings,
  log: GatewayLogger,
): Promise<S> {
  const take = store.snapshot;
  if (take === undefined) return store;
  let writing: Promise<void> = Promise.resolve();
  let failing = false;
  const write = (): Promise<void> =>
    (writing = writing.then(async () => {
      try {
        await writeSnapshotFile(settings.file, take());
        if (failing) log.info({ file: settings.file }, 'memory store snapshot written again');
        failing = false;
      } catch (error) {
        // Logged once per run of failures: the last good file stays in place.
        if (!failing) log.error({ file: settings.file, err: error }, 'memory store snapshot could not be written; keeping the last one');
        failing = true;
      }
    }));
  try {
    await writeSnapshotFile(settings.file, take());
  } catch (error) {
    throw new FloodgateError(
      ErrorCode.INVALID_CONFIG,
      `store.snapshotFile: ${settings.file} cannot be written: ${(error as Error).message}. Name a file in a directory this process may write to.`,
      error,
    );
  }
  const timer = setInterval(() => void write(), settings.everyMs);
  timer.unref();
  return {
    ...store,
    close: async () => {
      clearInterval(timer);
      await write();
      await store.close();
    },
  };
}
