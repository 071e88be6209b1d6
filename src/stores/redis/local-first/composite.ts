/** LocalFirstStore's all-or-nothing consumes. */
/**
 * Decided from the leases in hand when every part can be, else sent to Redis whole (after which each admitted part
 * leases for the next).
 */
import { FloodgateError } from '../../../core/errors.js';
import { samePolicy, type Operation, type Outcome } from '../../../core/policy.js';
import { lapse } from '../../lease-core.js';
import { crossSlotError } from '../composite-call.js';
import { isClusterKind } from '../client-adapter.js';
import { admitted, blocked, exhausted, msUntil } from './lease.js';
import type { LocalFirstHost } from './host.js';

/** How memory sees one part: covered by its lease, refused by a mark (with the refusal), or undecidable. */
type Look = { readonly fits: true } | { readonly fits: false; readonly refusal: Outcome } | undefined;

/** The look of every covered part: one object, not one per part and call. */
const FITS: Look = { fits: true };

function look(host: LocalFirstHost, op: Operation, t: number): Look {
  if (op.policy.algorithm !== 'fixed-window') return undefined;
  const e = host.entries.get(op.key);
  if (e === undefined || e.policy === undefined) return undefined;
  if (e.policy !== op.policy && !samePolicy(e.policy, op.policy)) return undefined;
  if (e.blockedUntil !== 0 && e.blockedUntil > t) {
    return { fits: false, refusal: blocked(msUntil(e.blockedUntil, t), msUntil(e.endsBy, t)) };
  }
  lapse(e, t);
  if (e.waiters.length > 0) return undefined;
  if (e.units >= op.amount) return FITS;
  // With a block duration the refusal must reach Redis, which sets the block for everyone.
  if (e.exhaustedUntil > t && op.policy.blockMs === 0) return { fits: false, refusal: exhausted(e, e.exhaustedUntil, t) };
  return undefined;
}

/**
 * The composite decided from memory at `t`, or undefined (nothing spent)
 * when some part needs Redis. Every part covered by its lease: each spends
 * from its lease. A part refused by a block or exhausted mark: nothing is
 * spent, and the covered parts report what they have. Exact as leases are:
 * a lease's units are already counted in Redis.
 */
export function decideAllInMemory(host: LocalFirstHost, operations: readonly Operation[], t: number): Outcome[] | undefined {
  if (crossSlot(host, operations) !== undefined) return undefined;
  const n = operations.length;
  const looks: Look[] = new Array(n);
  let all = true;
  for (let i = 0; i < n; i++) {
    const l = look(host, operations[i]!, t);
    if (l === undefined) return undefined;
    looks[i] = l;
    if (!l.fits) all = false;
  }
  const outcomes: Outcome[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const op = operations[i]!;
    const l = looks[i]!;
    // Most recently used, as a consume's touch does, so a hot key is never the one evicted.
    const e = host.touch(op.key, t);
    if (!l.fits) {
      outcomes[i] = l.refusal;
      continue;
    }
    if (all) {
      e.units -= op.amount;
      host.decided(e, op.amount, t);
      host.topUpIfLow(op.key, e, t);
    }
    outcomes[i] = admitted(e, t);
  }
  return outcomes;
}

/**
 * The composite decided from memory when it can, else by Redis as one script
 * call. A part whose lease call is in flight (a top-up, or a consume's call)
 * holds units Redis already counts but this process has not heard of yet:
 * the composite waits for those answers and looks at memory again first.
 * Before the Redis call, the leases of its fixed-window parts go back to
 * Redis (queued ahead of it), so the script counts each unit once; the local
 * entries then hold no units, so nothing here admits past what Redis said.
 * When Redis admits a composite of fixed-window parts, each part asks for a
 * lease (a top-up sized by the key's demand), so keys used only in
 * composites are leased as keys used in single consumes are.
 */
export async function consumeAllLeased(host: LocalFirstHost, operations: readonly Operation[]): Promise<Outcome[]> {
  const wrongSlots = crossSlot(host, operations);
  if (wrongSlots !== undefined) throw wrongSlots;
  let t = host.readTime();
  if (t instanceof FloodgateError) throw t;
  const local = decideAllInMemory(host, operations, t);
  if (local !== undefined) return local;
  const pending: Promise<void>[] = [];
  for (const op of operations) {
    const e = op.policy.algorithm === 'fixed-window' ? host.entries.get(op.key) : undefined;
    if (e?.inFlight === true) pending.push(host.leaseAnswered(e));
  }
  if (pending.length > 0) {
    await Promise.all(pending);
    t = host.readTime();
    if (t instanceof FloodgateError) throw t;
    const answered = decideAllInMemory(host, operations, t);
    if (answered !== undefined) return answered;
  }
  for (const op of operations) {
    if (op.policy.algorithm !== 'fixed-window') continue;
    const conflict = host.conflict(op);
    if (conflict !== undefined) throw conflict;
  }
  let returned = false;
  for (const op of operations) {
    if (op.policy.algorithm !== 'fixed-window') continue;
    const e = host.touch(op.key, t);
    if (e.units > 0) returned = true;
    host.giveBack(op.key, e);
    // The composite's usage is this policy's, as a consume would take the key over.
    e.policy = op.policy;
    e.lastUse = t;
  }
  if (returned) host.flush();
  const outcomes = await host.inner.consumeAll(operations);
  // Leases help only when memory can decide every part: every part a fixed window.
  if (outcomes.every((o) => o.allowed) && operations.every((op) => op.policy.algorithm === 'fixed-window')) {
    const after = host.readTime();
    if (typeof after === 'number') {
      for (const op of operations) {
        const e = host.entries.get(op.key);
        if (e !== undefined && e.policy === op.policy) host.leaseAfter(op.key, e, op.amount, after);
      }
    }
  }
  return outcomes;
}

/**
 * On Redis Cluster, CROSS_SLOT for keys in different slots, whether or not the leases could cover them: the same call must
 * not work or fail by what happens to be leased. With `crossSlot: 'split'` none: the inner store splits what memory cannot decide.
 */
function crossSlot(host: LocalFirstHost, operations: readonly Operation[]): FloodgateError | undefined {
  const inner = host.inner;
  return isClusterKind(inner.clientKind) && inner.crossSlot === 'reject' ? crossSlotError(operations) : undefined;
}
