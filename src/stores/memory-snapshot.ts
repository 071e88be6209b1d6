/** The memory store's snapshot: its counters, blocks and overflow sketches as a versioned value, and its text form. */
/**
 * Every key's algorithm state is kept as the store held it (absolute times by the store's clock), so a store
 * restored from it decides as the one it was taken from would have: counts never lower than they were, blocks and
 * calendar windows where they were. Keys past their expiry are dropped when it is restored; concurrency slots are
 * not kept (their holders went with the process).
 */
import { BLOCK_FOREVER, type Policy } from '../core/policy.js';
import type { KeyState } from '../algorithms/index.js';
import { ErrorCode, FloodgateError } from '../core/errors.js';
import { describeValue } from '../core/describe-value.js';

/** The `format` field every snapshot carries. */
export const SNAPSHOT_FORMAT = 'floodgate-memory-snapshot';
/** The version this floodgate writes and reads. */
export const SNAPSHOT_VERSION = 1;

/** Which algorithm a state belongs to, by its shape: a restored state is used only by a policy of the same algorithm. */
export type StateShape = 'fixed-window' | 'sliding-window' | 'sliding-log' | 'token-bucket' | 'none';

/**
 * One key: `[key, shape, usage, blockedUntil, expiresAt]`; usage is the algorithm's state (null for none), blockedUntil
 * 0, -1 (until unblocked) or an absolute time, expiresAt an absolute time or null (never).
 */
export type SnapshotEntry = [key: string, shape: StateShape, usage: unknown, blockedUntil: number, expiresAt: number | null];

/** One overflow sketch: its id (policy and prefix), its hash seeds and width, and its cells that hold state. */
export interface SnapshotSketch {
  readonly id: string;
  readonly width: number;
  readonly seeds: readonly [number, number];
  /** `[cell, usage, blockedUntil, expiresAt]` per cell that holds state. */
  readonly cells: ReadonlyArray<readonly [cell: number, usage: unknown, blockedUntil: number, expiresAt: number | null]>;
}

/** A memory store's state, from `MemoryStore.snapshot()`; restored with `MemoryStore.restore()`. */
export interface MemorySnapshot {
  readonly format: typeof SNAPSHOT_FORMAT;
  readonly version: typeof SNAPSHOT_VERSION;
  /** When it was taken, by the store's clock (ms). */
  readonly takenAt: number;
  /** The keys, least recently used first. */
  readonly entries: readonly SnapshotEntry[];
  /** The overflow sketches that held state. */
  readonly sketches: readonly SnapshotSketch[];
}

/** The shape of `usage`, an algorithm state of src/algorithms/. */
export function shapeOf(usage: unknown): StateShape {
  if (usage === undefined || usage === null) return 'none';
  const u = usage as Record<string, unknown>;
  if (Array.isArray(u.t)) return 'sliding-log';
  if ('m' in u) return 'token-bucket';
  if ('p' in u) return 'sliding-window';
  return 'fixed-window';
}

const SHAPE_FIELDS: Readonly<Record<Exclude<StateShape, 'none' | 'sliding-log'>, readonly string[]>> = {
  'fixed-window': ['c', 'r'],
  'sliding-window': ['p', 'c', 's'],
  'token-bucket': ['m', 'r'],
};

/**
 * The state a restored key's first operation starts from: its own when `policy`'s algorithm made it, else only its
 * block (the usage of another algorithm means nothing to this one). Marks the key an ordinary one from then on.
 */
export function adoptRestored(
  entry: { restored: StateShape | undefined },
  policy: Policy,
  state: KeyState | undefined,
): KeyState | undefined {
  const shape = entry.restored;
  entry.restored = undefined;
  if (state === undefined || shape === 'none' || shape === policy.algorithm) return state;
  return state.blockedUntil === 0 ? undefined : { usage: undefined, blockedUntil: state.blockedUntil };
}

/** Most timestamps one sliding-log state may hold in a snapshot (a log holds at most its limit). */
const MAX_LOG = 1_000_000;

/** Text of `snapshot`: one JSON document (Infinity written as null). */
export function encodeSnapshot(snapshot: MemorySnapshot): string {
  return JSON.stringify(snapshot);
}

/**
 * Reads a snapshot's text, checking every field.
 * @param source - where it came from (a file name), for the message
 * @throws FloodgateError INVALID_SNAPSHOT for text that is not a whole snapshot of this version (truncated, foreign, newer)
 */
export function decodeSnapshot(text: string, source = 'the snapshot'): MemorySnapshot {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw bad(source, `is not a whole snapshot (cut short or not JSON: ${(error as Error).message})`, error);
  }
  return checkSnapshot(value, source);
}

/**
 * Checks that `value` is a snapshot this floodgate can restore.
 * @throws FloodgateError INVALID_SNAPSHOT naming `source` and the first field that is wrong
 */
export function checkSnapshot(value: unknown, source = 'the snapshot'): MemorySnapshot {
  if (typeof value !== 'object' || value === null || (value as { format?: unknown }).format !== SNAPSHOT_FORMAT)
    throw bad(source, `is not a floodgate memory snapshot (no "format": "${SNAPSHOT_FORMAT}")`);
  const s = value as Record<string, unknown>;
  if (s.version !== SNAPSHOT_VERSION)
    throw bad(
      source,
      typeof s.version === 'number' && s.version > SNAPSHOT_VERSION
        ? `was written by a newer floodgate (version ${s.version}; this one reads ${SNAPSHOT_VERSION})`
        : `has version ${describeValue(s.version)}; this floodgate reads ${SNAPSHOT_VERSION}`,
    );
  if (!isTime(s.takenAt)) throw bad(source, `has no takenAt time`);
  if (!Array.isArray(s.entries)) throw bad(source, 'has no entries list');
  if (!Array.isArray(s.sketches)) throw bad(source, 'has no sketches list');
  s.entries.forEach((e: unknown, i) => checkEntry(e, `entries[${i}]`, source));
  s.sketches.forEach((k: unknown, i) => checkSketch(k, `sketches[${i}]`, source));
  return value as MemorySnapshot;
}

function checkEntry(e: unknown, at: string, source: string): void {
  if (!Array.isArray(e) || e.length !== 5 || typeof e[0] !== 'string')
    throw bad(source, `${at} is not [key, shape, usage, blockedUntil, expiresAt]`);
  const shape = e[1] as unknown;
  if (shape !== 'none' && shape !== 'sliding-log' && !(typeof shape === 'string' && Object.hasOwn(SHAPE_FIELDS, shape)))
    throw bad(source, `${at} has an unknown shape ${describeValue(shape)}`);
  checkState(e[2], shape as StateShape, e[3], e[4], at, source);
}

function checkSketch(k: unknown, at: string, source: string): void {
  const s = k as Partial<SnapshotSketch> | null;
  if (typeof s !== 'object' || s === null || typeof s.id !== 'string' || !Number.isSafeInteger(s.width) || s.width! < 1)
    throw bad(source, `${at} is not a sketch (id, width, seeds, cells)`);
  if (!Array.isArray(s.seeds) || s.seeds.length !== 2 || !s.seeds.every((n) => Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff))
    throw bad(source, `${at}.seeds is not two 32-bit numbers`);
  if (!Array.isArray(s.cells)) throw bad(source, `${at}.cells is not a list`);
  s.cells.forEach((c: unknown, j) => {
    const cell = c as unknown[];
    if (!Array.isArray(cell) || cell.length !== 4 || !Number.isSafeInteger(cell[0]) || (cell[0] as number) < 0)
      throw bad(source, `${at}.cells[${j}] is not [cell, usage, blockedUntil, expiresAt]`);
    checkState(cell[1], shapeOf(cell[1]), cell[2], cell[3], `${at}.cells[${j}]`, source);
  });
}

function checkState(usage: unknown, shape: StateShape, blockedUntil: unknown, expiresAt: unknown, at: string, source: string): void {
  if (shape === 'none') {
    if (usage !== null) throw bad(source, `${at} has shape none but usage ${describeValue(usage)}`);
  } else if (shape === 'sliding-log') {
    const t = (usage as { t?: unknown } | null)?.t;
    if (!Array.isArray(t) || t.length > MAX_LOG || !t.every(isTime)) throw bad(source, `${at}.usage is not a sliding log`);
  } else {
    const u = usage as Record<string, unknown> | null;
    if (typeof u !== 'object' || u === null || !SHAPE_FIELDS[shape].every((f) => typeof u[f] === 'number' && Number.isFinite(u[f])))
      throw bad(source, `${at}.usage is not a ${shape} state (${SHAPE_FIELDS[shape].join(', ')})`);
  }
  if (!(blockedUntil === 0 || blockedUntil === BLOCK_FOREVER || isTime(blockedUntil)))
    throw bad(source, `${at} has a blockedUntil that is not 0, -1 or a time`);
  if (!(expiresAt === null || isTime(expiresAt))) throw bad(source, `${at} has an expiresAt that is not a time or null`);
}

function isTime(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function bad(source: string, what: string, cause?: unknown): FloodgateError {
  return new FloodgateError(
    ErrorCode.INVALID_SNAPSHOT,
    `${source} ${what}; nothing was restored. Move it aside to start empty, or restore another snapshot.`,
    cause,
  );
}
