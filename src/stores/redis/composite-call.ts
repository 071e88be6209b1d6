/** The composite script call of RedisStore.consumeAll. */
/**
 * Its KEYS and ARGV, the Cluster same-slot check, and the reply's decoding.
 */
import { windowArgument } from '../../core/calendar-window.js';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../core/errors.js';
import { ALGORITHMS, limitArgument, type Operation, type Policy } from '../../core/policy.js';
import { redisKeys, redisStateKey } from './key-names.js';
import { keySlot } from './key-slot.js';
import { COMPOSITE_SCRIPT } from './lua/scripts.generated.js';
import type { PipelineCall } from './turn-pipeline.js';

/** ARGV before the parts (composite.lua's FIRST_PART - 1): three unused, the clock flag, the time. */
const HEADER_WIDTH = 5;
/** ARGV per part (composite.lua's PART_WIDTH): algorithm, limit, window, block, cost. */
const PART_WIDTH = 5;

/**
 * The script call that consumes every operation's amount or none: each
 * part's state hash in KEYS (a sliding-log part's list right after it),
 * ARGV as composite.lua reads it, and `answer` for its reply. `now` is the
 * client clock's time, or undefined to use Redis TIME. KEYS and ARGV are
 * made at their final length: a composite is one call per request.
 */
export function compositeCall(operations: readonly Operation[], now: number | undefined, answer: PipelineCall['answer']): PipelineCall {
  const n = operations.length;
  let logs = 0;
  for (let i = 0; i < n; i++) if (operations[i]!.policy.algorithm === 'sliding-log') logs++;
  const keys = new Array<string>(n + logs);
  const args = new Array<string>(HEADER_WIDTH + PART_WIDTH * n);
  args[0] = args[1] = args[2] = '0';
  args[3] = now === undefined ? '0' : '1';
  args[4] = now === undefined ? '0' : String(now);
  for (let i = 0, k = 0, a = HEADER_WIDTH; i < n; i++, a += PART_WIDTH) {
    const operation = operations[i]!;
    const p = operation.policy;
    if (p.algorithm === 'sliding-log') {
      const names = redisKeys(operation.key);
      keys[k++] = names.state;
      keys[k++] = names.log;
    } else {
      keys[k++] = redisStateKey(operation.key);
    }
    if (p.calendar === undefined) {
      const policy = policyArgs(p);
      for (let j = 0; j < 4; j++) args[a + j] = policy[j]!;
    } else {
      // A calendar window's ends change with the period: made for each call, from this host's clock.
      args[a] = p.algorithm;
      args[a + 1] = limitArgument(p);
      args[a + 2] = windowArgument(p.windowMs, p.calendar, now ?? Date.now());
      args[a + 3] = String(p.blockMs);
    }
    args[a + 4] = String(operation.amount);
  }
  return { script: COMPOSITE_SCRIPT, keys, args, answer };
}

/** A policy's four script arguments, made once per policy object (a limiter's policy is frozen and reused for every call). */
const argsOfPolicy = new WeakMap<Policy, readonly string[]>();

function policyArgs(p: Policy): readonly string[] {
  let args = argsOfPolicy.get(p);
  if (args === undefined) {
    args = [p.algorithm, limitArgument(p), String(p.windowMs), String(p.blockMs)];
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
