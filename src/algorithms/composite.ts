/** The all-or-nothing consume over several keys. */
/**
 * The pure step the memory and cluster stores apply, and the Lua composite script mirrors.
 */
import type { Outcome, Policy } from '../core/policy.js';
import { applyOperation, type Applied, type KeyState } from './index.js';
import type { AlgorithmImpl } from './types.js';

/** One part of a composite consume: a key's current state, the cost to spend there and its policy. */
export interface CompositePart {
  /** The key's state as read now (undefined for no usage). */
  readonly state: KeyState | undefined;
  /** Units to consume. */
  readonly amount: number;
  /** The policy of this part (parts may differ in algorithm, limit, window and block). */
  readonly policy: Policy;
  /** Replaces the policy's algorithm (the memory store's overflow sketch passes its own). */
  readonly impl?: AlgorithmImpl<unknown>;
}

/** What {@link applyComposite} decided. */
export interface CompositeApplied {
  /** True when every part admitted its cost, and so every part spent it. */
  readonly allowed: boolean;
  /** One outcome per part, in order. */
  readonly outcomes: Outcome[];
  /** One entry per part: the state to write, or null to leave the key exactly as it is. */
  readonly writes: (Applied | null)[];
}

/**
 * Consumes every part's cost if every part admits it, else spends nothing.
 *
 * Each part is tried as a plain consume ({@link applyOperation}). When all
 * admit, each part's state becomes its consumed state and its outcome is the
 * consume's. When one or more refuse, nothing is spent anywhere: a part that
 * would have admitted keeps its state and reports what it has left (its
 * `allowed` is true: it was not the reason), and a refusing part reports its
 * refusal and, with its own `blockMs`, is blocked as a single over-limit
 * consume would be. A part already blocked refuses without changing.
 */
export function applyComposite(parts: readonly CompositePart[], now: number): CompositeApplied {
  const tried: Applied[] = new Array(parts.length);
  let allowed = true;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const applied = applyOperation(part.state, 'consume', part.amount, part.policy, now, part.impl);
    tried[i] = applied;
    if (!applied.outcome.allowed) allowed = false;
  }
  if (allowed) return { allowed, outcomes: tried.map((t) => t.outcome), writes: tried };
  const outcomes: Outcome[] = new Array(parts.length);
  const writes: (Applied | null)[] = new Array(parts.length);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const applied = tried[i]!;
    if (applied.outcome.allowed) {
      // Unspent: a peek reports the same remaining and reset, and admits (a cost that fits means one unit fits).
      outcomes[i] = applyOperation(part.state, 'peek', 0, part.policy, now, part.impl).outcome;
      writes[i] = null;
    } else {
      outcomes[i] = applied.outcome;
      writes[i] = applied;
    }
  }
  return { allowed, outcomes, writes };
}
