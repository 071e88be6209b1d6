/** Concurrency slots over the cluster store's protocol. */
/**
 * How a slot answer travels as an outcome, and how the primary applies a slot operation to its MemoryStore's slot
 * table.
 */
import type { Operation, Outcome, Policy } from '../../core/policy.js';
import { slotCallError, type SlotAcquisition } from '../../core/slots.js';
import type { MemoryStore } from '../memory.js';
import type { BatchReply } from './batch-reply.js';
import { OPERATION_WIDTH, type BatchView } from './codec.js';
import { SLOT_CODE } from './slot-call.js';

/**
 * The stand-in operation a slot call carries through the worker's queue:
 * a peek (which invalidates nothing and holds no lease) under a policy that
 * is never sent.
 */
export function slotCarrier(key: string): Operation {
  return { kind: 'peek', key, amount: 0, policy: CARRIER_POLICY };
}
const CARRIER_POLICY: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 1, windowMs: 1, blockMs: 0 });

/** A slot answer as the outcome it travels as. */
function toOutcome(allowed: boolean, inUse: number, retryAfterMs: number): Outcome {
  return { allowed, remaining: inUse, resetMs: 0, retryAfterMs, emptyMs: 0 };
}

/** An acquire's answer, read back from the outcome it travelled as. */
export function acquisitionOf(outcome: Outcome): SlotAcquisition {
  return { admitted: outcome.allowed, inUse: outcome.remaining, retryAfterMs: outcome.retryAfterMs };
}

/**
 * Applies slot operation `i` of a batch (code, key and amount from its `o`,
 * owner and ttl from its `s`) to the store's slot table at time `now`, and
 * answers it in `reply`, or fails it when malformed: a worker of another
 * release must not touch a slot.
 */
export function applySlot(store: MemoryStore, reply: BatchReply, view: BatchView, i: number, now: number): void {
  const j = i * OPERATION_WIDTH;
  const [code, , key, amount] = view.operations.slice(j, j + OPERATION_WIDTH);
  const [owner, ttlMs] = view.slots?.get(i) ?? [];
  const acquire = code === SLOT_CODE.acquire;
  const release = code === SLOT_CODE.release;
  const bad = slotCallError('ClusterStorePrimary', key, owner, release ? undefined : ttlMs, acquire ? amount : undefined);
  if (bad !== undefined) {
    reply.fail(i, bad.code, bad.message);
    return;
  }
  const [k, o, ttl] = [key as string, owner as string, ttlMs as number];
  if (acquire) {
    const answer = store.slots.acquire(k, amount as number, o, ttl, now);
    reply.answer(toOutcome(answer.admitted, answer.inUse, answer.retryAfterMs));
  } else {
    reply.answer(toOutcome(release ? store.slots.release(k, o, now) : store.slots.renew(k, o, ttl, now), 0, 0));
  }
}
