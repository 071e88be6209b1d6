/** A composite whose keys span Redis Cluster slots, decided one slot group at a time and given back when a group refuses. */
/**
 * One script can only touch keys of one slot, so RedisStore's `crossSlot: 'split'` decides each slot's parts atomically,
 * all groups at once, and rewards what the admitting groups spent when any group refuses.
 */
import type { Operation, Outcome } from '../../core/policy.js';
import { keySlot } from './key-slot.js';
import { redisKeys } from './key-names.js';

/** What {@link consumeAcrossSlots} asks of the store: its own one-slot composite and a single operation. */
export interface SlotGroupStore {
  consumeAll(operations: readonly Operation[]): Promise<Outcome[]>;
  apply(operation: Operation): Promise<Outcome>;
}

/** The operations' indexes grouped by the Cluster slot of their keys, in order of each slot's first part. */
export function slotGroups(operations: readonly Operation[]): number[][] {
  const bySlot = new Map<number, number[]>();
  operations.forEach((operation, i) => {
    const slot = keySlot(redisKeys(operation.key).state);
    const group = bySlot.get(slot);
    if (group === undefined) bySlot.set(slot, [i]);
    else group.push(i);
  });
  return [...bySlot.values()];
}

/**
 * Decides a composite over several slots: each slot's parts in one atomic script, every group sent at once (one round trip,
 * not one per slot). When every group admits, the request is admitted. When any refuses, each admitting group's parts are
 * rewarded what they spent, and report the state after that reward. Between the two steps, those units are held: another
 * request on the same keys may be refused on them for about one round trip (under-admission), never admitted past a limit.
 * A group whose call fails rejects the whole composite after the others' spending is rewarded, so the caller's fallback
 * decides as for any store failure.
 */
export async function consumeAcrossSlots(
  store: SlotGroupStore,
  operations: readonly Operation[],
  groups: readonly (readonly number[])[],
): Promise<Outcome[]> {
  const results = await Promise.allSettled(groups.map((group) => store.consumeAll(group.map((i) => operations[i]!))));
  const outcomes: Outcome[] = new Array(operations.length);
  let refused = false;
  let failure: unknown;
  results.forEach((result, g) => {
    if (result.status === 'rejected') {
      failure ??= result.reason;
      return;
    }
    groups[g]!.forEach((i, j) => (outcomes[i] = result.value[j]!));
    if (result.value.some((o) => !o.allowed)) refused = true;
  });
  if (!refused && failure === undefined) return outcomes;
  // Give back what admitting groups spent: a refusal, or a failure elsewhere, means this request is not admitted as a whole.
  const rewards: Promise<void>[] = [];
  results.forEach((result, g) => {
    if (result.status !== 'fulfilled' || result.value.some((o) => !o.allowed)) return;
    for (const i of groups[g]!) {
      const o = operations[i]!;
      rewards.push(
        store.apply({ kind: 'reward', key: o.key, amount: o.amount, policy: o.policy }).then(
          (after) => void (outcomes[i] = after),
          // A reward that fails leaves those units spent until the window ends: under-admission, never over.
          () => undefined,
        ),
      );
    }
  });
  await Promise.all(rewards);
  if (failure !== undefined) throw failure;
  return outcomes;
}
