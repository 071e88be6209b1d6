/** The concurrency-slot script calls of RedisStore: their KEYS and ARGV, and the decoding of their replies. */
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import type { SlotAcquisition } from '../../core/slots.js';
import type { ScriptCall } from './client-adapter.js';
import { redisKeys } from './key-names.js';
import { SLOT_SCRIPTS } from './lua/slots.generated.js';

/** The slot operations, each one script. */
export type SlotOperation = keyof typeof SLOT_SCRIPTS;

/**
 * The script call of one slot operation on store key `key`: KEYS is the
 * key's slot set (its hash tag kept, so it routes on Redis Cluster as the
 * key's other state does), ARGV as slot-prelude.lua reads it. `now` is the
 * store clock's time, or undefined to use Redis TIME.
 */
export function slotCall(operation: SlotOperation, key: string, now: number | undefined, args: readonly string[]): ScriptCall {
  return {
    script: SLOT_SCRIPTS[operation],
    keys: [redisKeys(key).slots],
    args: [now === undefined ? '0' : '1', now === undefined ? '0' : String(now), ...args],
  };
}

/** Reads an acquire reply ({admitted, in use, retry ms}), or a STORE_ERROR when it has the wrong shape. */
export function decodeAcquisition(reply: unknown): SlotAcquisition | FloodgateError {
  // Number() because ioredis with stringNumbers: true answers integers as strings.
  const v = Array.isArray(reply) && reply.length === 3 ? reply.map(Number) : undefined;
  if (v === undefined || !v.every((x) => Number.isSafeInteger(x) && x >= 0)) return badReply(reply, 'three integers');
  return { admitted: v[0] === 1, inUse: v[1]!, retryAfterMs: v[2]! };
}

/** Reads a release or renew reply (1 or 0), or a STORE_ERROR when it is anything else. */
export function decodeFlag(reply: unknown): boolean | FloodgateError {
  const x = Number(reply);
  if (x !== 0 && x !== 1) return badReply(reply, '0 or 1');
  return x === 1;
}

function badReply(reply: unknown, expected: string): FloodgateError {
  const got = Array.isArray(reply) ? `${reply.length} values` : describeValue(reply);
  return new FloodgateError(ErrorCode.STORE_ERROR, `redis store failed: the slot script answered ${got} where ${expected} were expected.`);
}
