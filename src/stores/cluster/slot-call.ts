/** A concurrency-slot call on the cluster store's wire. */
/**
 * The slot operations' codes and what a worker sends of one (codec and worker share them).
 */

/**
 * Operation codes of the slot operations, alongside OP_CODE's, LEASE_CODE
 * and COMPOSITE_CODE. A slot operation's entry in a batch's `o` is
 * [code, -1 (no policy), key, limit (acquire) or 0], and its owner id and
 * ttl travel in the batch's `s` triples. Its answer is an outcome whose
 * `allowed` says admitted / freed / renewed, `remaining` the slots in use
 * (acquire) and `retryAfterMs` the ms until the earliest slot expires (a
 * refused acquire). A primary that does not know the codes fails the
 * operation as malformed; nothing else in the batch is affected.
 */
export const SLOT_CODE = { acquire: 66, release: 67, renew: 68 } as const;

/** One of {@link SLOT_CODE}'s values. */
export type SlotCode = (typeof SLOT_CODE)[keyof typeof SLOT_CODE];

/** What a worker sends of a slot call, beside its key. */
export interface SlotCall {
  readonly code: SlotCode;
  readonly owner: string;
  /** 0 for a release. */
  readonly ttlMs: number;
  /** The limit of an acquire; 0 otherwise. */
  readonly limit: number;
}

/** Whether `code` is a slot operation's. */
export function isSlotCode(code: unknown): code is SlotCode {
  return code === SLOT_CODE.acquire || code === SLOT_CODE.release || code === SLOT_CODE.renew;
}
