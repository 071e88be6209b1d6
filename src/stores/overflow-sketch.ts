/** The memory store's overflow sketch. */
/**
 * A bounded count-min sketch of algorithm states that decides, conservatively, for keys that find the table full.
 */
import { randomBytes } from 'node:crypto';
import { ALGORITHM_IMPLS, applyOperation, type AlgorithmImpl, type Applied, type KeyState } from '../algorithms/index.js';
import type { SlidingWindowState } from '../algorithms/sliding-window.js';
import type { Operation, Outcome, Policy } from '../core/policy.js';
import type { SnapshotSketch } from './memory-snapshot.js';

/** Rows of every sketch: a key is refused early only when all of its cells are busy, so more rows make that rarer. */
export const SKETCH_ROWS = 4;

interface Cell {
  state: KeyState;
  expiresAt: number;
}

/**
 * Fixed window for cells. A key's own window opens at its first consume, which a
 * cell shared by many keys cannot know; every such window overlaps at most two
 * aligned windows, so a cell counts the previous aligned window (`p`) and the
 * current one (`c`) and admits while both together leave room. Never more than
 * the limit in any key's window; a key may be refused early.
 */
const fixedWindowCell: AlgorithmImpl<SlidingWindowState> = {
  normalize: ALGORITHM_IMPLS['sliding-window'].normalize as AlgorithmImpl<SlidingWindowState>['normalize'],
  tryConsume(state, cost, policy, now) {
    const next = openCell(state, policy, now);
    if (next.p + next.c + cost > policy.limit) return null;
    next.c += cost;
    return next;
  },
  add(state, amount, policy, now) {
    const next = openCell(state, policy, now);
    next.c += amount;
    return next;
  },
  remove(state, amount) {
    return state ? { p: state.p, c: Math.max(0, state.c - amount), s: state.s } : undefined;
  },
  view(state, cost, policy, now) {
    if (!state) return { remaining: policy.limit, resetMs: 0, retryAfterMs: 0, emptyMs: 0 };
    const W = policy.windowMs;
    const wait = (units: number): number => {
      if (state.p + state.c + units <= policy.limit) return 0;
      // Next aligned window: the previous one has left; the one after: this one has too.
      return state.c + units <= policy.limit ? state.s + W - now : state.s + 2 * W - now;
    };
    const remaining = Math.max(0, policy.limit - state.p - state.c);
    return {
      remaining,
      resetMs: state.c > 0 ? state.s + 2 * W - now : state.p > 0 ? state.s + W - now : 0,
      retryAfterMs: wait(cost),
      emptyMs: wait(1),
    };
  },
  expiresAt(state, policy) {
    return state.s + (state.c > 0 ? 2 : 1) * policy.windowMs;
  },
};

function openCell(state: SlidingWindowState | undefined, policy: Policy, now: number): SlidingWindowState {
  return state ? { p: state.p, c: state.c, s: state.s } : { p: 0, c: 0, s: now - (now % policy.windowMs) };
}

/**
 * A count-min sketch for one policy: {@link SKETCH_ROWS} rows of cells, each
 * cell an ordinary algorithm state that counts every key hashed to it. Each
 * key has one cell per row, and every cell's usage is at least the usage of
 * every key hashed there, because every admitted unit is added to all of the
 * key's cells. So a key is admitted only when one of its cells admits it:
 * never over its limit, sometimes refused early when its cells are shared
 * with busy keys. Nothing in a cell can be taken back, so a reward or reset
 * of a key held here does nothing.
 *
 * Cells are hashed with a random seed per sketch, so a client cannot aim
 * its keys at another key's cells without first learning the seed.
 */
export class OverflowSketch {
  private readonly width: number;
  private cells: Array<Cell | undefined> | undefined;
  /** The latest expiry of any cell: after it the sketch holds nothing and its array is dropped. */
  private liveUntil = 0;
  private readonly impl: AlgorithmImpl<unknown>;
  private seed1: number;
  private seed2: number;
  private readonly index = new Array<number>(SKETCH_ROWS);

  /**
   * @param cellCount - cells in all rows together (at least {@link SKETCH_ROWS})
   * @param policy - the one policy every key of this sketch is decided under
   */
  constructor(
    cellCount: number,
    private readonly policy: Policy,
  ) {
    this.width = Math.max(1, Math.floor(cellCount / SKETCH_ROWS));
    // Calendar windows are aligned already (every key's window is the period's), so a cell is a plain fixed window.
    this.impl =
      policy.algorithm === 'fixed-window' && policy.calendar === undefined
        ? (fixedWindowCell as AlgorithmImpl<unknown>)
        : ALGORITHM_IMPLS[policy.algorithm];
    const seeds = randomBytes(8);
    this.seed1 = seeds.readUInt32LE(0);
    this.seed2 = seeds.readUInt32LE(4);
  }

  /** Whether a consume of `operation` would be admitted here, without spending: a composite's first phase. */
  fits(operation: Operation, now: number): boolean {
    const { amount, policy } = operation;
    const states = this.slots(operation.key, now).map((slot) => this.read(slot, now));
    return states.some((state) => applyOperation(state, 'consume', amount, policy, now, this.impl).outcome.allowed);
  }

  /** Decides `operation` (under this sketch's policy) for a key the table has no room for. */
  apply(operation: Operation, now: number): Outcome {
    const { kind, amount, policy } = operation;
    const slots = this.slots(operation.key, now);
    const states = slots.map((slot) => this.read(slot, now));
    const probe = kind === 'consume' || kind === 'penalty' || kind === 'block' ? kind : 'peek';
    const results = states.map((state) => applyOperation(state, probe, amount, policy, now, this.impl));
    const best = pickBest(results);
    if (probe === 'consume') {
      if (best.outcome.allowed) {
        // Admitted by one cell: the units count in every cell, whether or not that cell had room.
        for (let i = 0; i < SKETCH_ROWS; i++) {
          this.write(
            slots[i]!,
            results[i]!.outcome.allowed ? results[i]! : applyOperation(states[i], 'penalty', amount, policy, now, this.impl),
          );
        }
      } else {
        // Refused by all: nothing spent; a block (with blockMs) lands in every cell, so the key stays refused.
        for (let i = 0; i < SKETCH_ROWS; i++) this.write(slots[i]!, results[i]!);
      }
    } else if (probe !== 'peek') {
      for (let i = 0; i < SKETCH_ROWS; i++) this.write(slots[i]!, results[i]!);
    }
    return best.outcome;
  }

  /**
   * The state a key entering the table starts from: the usage of its least
   * busy cell, which is at least its own. Undefined when the sketch cannot
   * have counted it (a cell of its is empty).
   */
  seed(key: string, now: number): KeyState | undefined {
    if (this.cells === undefined) return undefined;
    const slots = this.slots(key, now);
    const states = slots.map((slot) => this.read(slot, now));
    if (states.some((s) => s === undefined)) return undefined;
    const best = states[pickBestIndex(states.map((state) => applyOperation(state, 'peek', 0, this.policy, now, this.impl)))]!;
    if (this.impl !== fixedWindowCell) return best;
    // A key's own fixed window holds only units of the last two aligned windows and ends within one window from now.
    const cell = fixedWindowCell.normalize(best.usage as SlidingWindowState | undefined, this.policy, now);
    const used = cell === undefined ? 0 : cell.p + cell.c;
    const usage = used > 0 ? { c: used, r: now + this.policy.windowMs } : undefined;
    return usage === undefined && best.blockedUntil === 0 ? undefined : { usage, blockedUntil: best.blockedUntil };
  }

  /** True while some cell may hold usage. */
  active(now: number): boolean {
    if (this.cells !== undefined && now >= this.liveUntil) this.cells = undefined;
    return this.cells !== undefined;
  }

  /** Its cells that hold state at `now`, for a snapshot under `id`; undefined when none does. */
  snapshot(id: string, now: number): SnapshotSketch | undefined {
    if (!this.active(now)) return undefined;
    const cells: Array<[number, unknown, number, number | null]> = [];
    this.cells!.forEach((cell, i) => {
      if (cell !== undefined && cell.expiresAt > now)
        cells.push([i, cell.state.usage ?? null, cell.state.blockedUntil, Number.isFinite(cell.expiresAt) ? cell.expiresAt : null]);
    });
    return cells.length === 0 ? undefined : { id, width: this.width, seeds: [this.seed1, this.seed2], cells };
  }

  /**
   * Takes a snapshot's cells and seeds (so every key finds its own cells again), when it was made with this width;
   * false, and nothing taken, otherwise.
   */
  restore(saved: SnapshotSketch, now: number): boolean {
    if (saved.width !== this.width) return false;
    [this.seed1, this.seed2] = saved.seeds;
    this.cells = new Array<Cell | undefined>(SKETCH_ROWS * this.width);
    for (const [i, usage, blockedUntil, expiresAt] of saved.cells) {
      const until = expiresAt ?? Infinity;
      if (i >= this.cells.length || until <= now) continue;
      this.cells[i] = { state: { usage: usage ?? undefined, blockedUntil }, expiresAt: until };
      if (until > this.liveUntil) this.liveUntil = until;
    }
    return true;
  }

  private slots(key: string, now: number): number[] {
    if (!this.active(now)) this.cells = new Array<Cell | undefined>(SKETCH_ROWS * this.width);
    // Two seeded FNV-1a hashes, combined per row (Kirsch–Mitzenmacher).
    let h1 = 0x811c9dc5 ^ this.seed1;
    let h2 = 0x811c9dc5 ^ this.seed2;
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 0x01000193);
      h2 = Math.imul(h2 ^ c, 0x01000193);
    }
    h1 >>>= 0;
    h2 = (h2 | 1) >>> 0;
    for (let row = 0; row < SKETCH_ROWS; row++) this.index[row] = row * this.width + ((h1 + row * h2) % this.width);
    return this.index.slice();
  }

  private read(slot: number, now: number): KeyState | undefined {
    const cell = this.cells![slot];
    return cell !== undefined && cell.expiresAt > now ? cell.state : undefined;
  }

  private write(slot: number, applied: Applied): void {
    if (applied.state === undefined) {
      this.cells![slot] = undefined;
      return;
    }
    this.cells![slot] = { state: applied.state, expiresAt: applied.expiresAt };
    if (applied.expiresAt > this.liveUntil) this.liveUntil = applied.expiresAt;
  }
}

/** The outcome the key gets: an admitting cell with the most left, else the cell that frees up first. */
function pickBest(results: Applied[]): Applied {
  return results[pickBestIndex(results)]!;
}

function pickBestIndex(results: Applied[]): number {
  let best = 0;
  for (let i = 1; i < results.length; i++) {
    const a = results[i]!.outcome;
    const b = results[best]!.outcome;
    if (a.allowed !== b.allowed ? a.allowed : a.allowed ? a.remaining > b.remaining : a.retryAfterMs < b.retryAfterMs) best = i;
  }
  return best;
}
