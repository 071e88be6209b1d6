/** The composite script call of RedisStore.consumeAll. */
/**
 * Its KEYS and ARGV, the Cluster same-slot check, and the reply's decoding.
 */
import { windowArgument } from '../../core/calendar-window.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { ALGORITHMS, type Operation, type Policy } from '../../core/policy.js';
import { redisKeys, redisStateKey } from './key-names.js';
import { keySlot } from './key-slot.js';
import { COMPOSITE_SCRIPT } from './lua/scripts.generated.js';
import type { ScriptCall } from './client-adapter.js';

/**
 * The script call that consumes every operation's amount or none: each
 * part's state hash in KEYS (a sliding-log part's list right after it),
 * ARGV as composite.lua reads it. `now` is the client clock's time, or
 * undefined to use Redis TIME.
 */
export function compositeCall(operations: readonly Operation[], now: number | undefined): ScriptCall {
  const keys: string[] = [];
  const args = ['0', '0', '0', now === undefined ? '0' : '1', now === undefined ? '0' : String(now)];
  for (const operation of operations) {
    const p = operation.policy;
    if (p.algorithm === 'sliding-log') {
      const k = redisKeys(operation.key);
      keys.push(k.state, k.log);
    } else {
      keys.push(redisStateKey(operation.key));
    }
    if (p.calendar === undefined) {
      const policy = policyArgs(p);
      args.push(policy[0]!, policy[1]!, policy[2]!, policy[3]!, String(operation.amount));
    }
    // A calendar window's ends change with the period: made for each call, from this host's clock.
    else
      args.push(
        p.algorithm,
        String(p.limit),
        windowArgument(p.windowMs, p.calendar, now ?? Date.now()),
        String(p.blockMs),
        String(operation.amount),
      );
  }
  return { script: COMPOSITE_SCRIPT, keys, args };
}

/** A policy's four script arguments, made once per policy object (a limiter's policy is frozen and reused for every call). */
const argsOfPolicy = new WeakMap<Policy, readonly string[]>();

function policyArgs(p: Policy): readonly string[] {
  let args = argsOfPolicy.get(p);
  if (args === undefined) {
    args = [p.algorithm, String(p.limit), String(p.windowMs), String(p.blockMs)];
    argsOfPolicy.set(p, args);
  }
  return args;
}

/**
 * Why RedisStore cannot send these operations as one script, or undefined:
 * every one must be a consume of an algorithm the script knows, on its own key.
 */
export function unsupportedOperation(operations: readonly Operation[]): FloodgateError | undefined {
  for (let i = 0; i < operations.length; i++) {
    const operation = operations[i]!;
    // One script reads each key once: a key twice would be decided against a state that is not its own.
    // Composites have a few parts: comparing pairs costs less than a Set per call.
    for (let j = 0; j < i; j++) {
      if (operations[j]!.key === operation.key) {
        return new FloodgateError(
          ErrorCode.INVALID_COMPOSITE,
          `RedisStore consumeAll takes each key once, but ${JSON.stringify(operation.key)} appears twice; add the costs into one part.`,
        );
      }
    }
    if (operation.kind !== 'consume') {
      return new FloodgateError(
        ErrorCode.INVALID_COMPOSITE,
        `RedisStore consumeAll takes consume operations only, not ${describeValue(operation.kind)}.`,
      );
    }
    if (!ALGORITHMS.includes(operation.policy.algorithm)) {
      return new FloodgateError(
        ErrorCode.INVALID_ALGORITHM,
        `RedisStore has no script for algorithm ${describeValue(operation.policy.algorithm)}; known: ${ALGORITHMS.join(', ')}.`,
      );
    }
  }
  return undefined;
}

/**
 * The CROSS_SLOT error when the operations' Redis keys fall in more than one
 * Cluster slot (one script can only touch one slot), or undefined. A bad
 * call, not a store failure: no fallback can make it atomic.
 */
export function crossSlotError(operations: readonly Operation[]): FloodgateError | undefined {
  const slots = operations.map((o) => keySlot(redisStateKey(o.key)));
  if (slots.every((s) => s === slots[0])) return undefined;
  const listed = operations.map((o, i) => `${JSON.stringify(o.key)} (slot ${slots[i]})`).join(', ');
  return new FloodgateError(
    ErrorCode.CROSS_SLOT,
    `consumeAll on Redis Cluster needs every part's key in one slot, but the keys ${listed} are in different slots. ` +
      'Put a common hash tag in the keys (or prefixes), e.g. "{org9}:u1" and "{org9}": store keys holding {tag} share its slot.',
  );
}
