/** Leasing: a LocalFirstStore's lease calls and how their answers are taken in. */
/**
 * The calls are sized as its pipeline sends them, and their answers taken into the key's entry and its waiters.
 */
import { FloodgateError, toStoreError } from '../../../core/errors.js';
import type { Operation, Outcome } from '../../../core/policy.js';
import type { TurnPipeline, PipelineCall } from '../turn-pipeline.js';
import { blocked, closedError, msUntil, rejectAll, type Entry } from './lease.js';
import { absorbReply, leaseScriptCall, parseLease, answerWaiters, sizeLease, type LeaseSizing } from './lease-call.js';
import type { LocalFirstStats } from './local-first-options.js';

/** What {@link Leasing} works through of its store. */
export interface LeasingHost {
  /** The store's name, in its errors. */
  readonly name: string;
  /** The store's id in broadcast messages. */
  readonly id: string;
  /** The pub/sub channel the lease script announces on. */
  readonly channel: string;
  /** Target lease duration in ms at the current demand. */
  readonly leaseMs: number;
  /** The share cap in thousandths. */
  readonly shareMilli: number;
  /** Whether the store runs on a clock of its own (then Redis is told the time). */
  readonly clocked: boolean;
  /** The turn's script calls, sent as one pipeline. */
  readonly pipeline: TurnPipeline<PipelineCall>;
  /** The store's counters. */
  readonly counters: Pick<LocalFirstStats, 'leaseCalls' | 'unitsLeased' | 'maxGrant'>;
  /** True once the store is closed. */
  closed(): boolean;
  /** Whether the pub/sub subscription is confirmed (a surplus is held only then). */
  live(): boolean;
  /** The store's time, or the clock's failure as a store error. */
  readTime(): number | FloodgateError;
  /** The store's time; throws the clock's failure. */
  now(): number;
  /** Returns the entry's unspent units to Redis and forgets them. */
  giveBack(key: string, e: Entry): void;
  /** Applies a control operation (the block a drained window calls for) in Redis and broadcasts it. */
  control(op: Operation): Promise<Outcome>;
}

/** The lease calls of a LocalFirstStore, and the round trip they measure. */
export class Leasing {
  /** Smoothed lease round trip, in local ms. */
  rttMs = 0;

  /** @param host - the store */
  constructor(private readonly host: LeasingHost) {}

  /**
   * Sends one lease call for the waiters of `e`, or a top-up when none wait.
   * The call is sized when the flush sends it, so it covers every consume
   * that queued on the key during this event-loop turn.
   */
  send(key: string, e: Entry): void {
    const host = this.host;
    const policy = e.policy;
    if (policy === undefined) return;
    const t = host.readTime();
    if (t instanceof FloodgateError) {
      rejectAll(e, t);
      return;
    }
    e.inFlight = true;
    host.counters.leaseCalls++;
    // Taken before the call goes out, so the deadline sentAt + msLeft can only be early.
    const sentAt = t;
    let need = 0;
    // Need, want and the share cap are written when the pipeline is sent (sizeLease).
    const call = leaseScriptCall(key, policy, host.clocked ? t : undefined, [
      '1',
      '0',
      '0',
      String(host.shareMilli),
      host.channel,
      host.id,
      key,
    ]);
    host.pipeline.push({
      ...call,
      answer: (error, reply) => {
        try {
          this.answered(key, e, sentAt, need, error, reply);
        } finally {
          const hooks = e.onAnswered;
          e.onAnswered = undefined;
          if (hooks !== undefined) for (const hook of hooks) hook();
        }
      },
      late: (reply) => {
        const parsed = parseLease(reply);
        if (parsed instanceof FloodgateError || host.closed()) return;
        if (absorbReply(e, sentAt, host.now(), parsed, false, host.clocked, host.counters) || !host.live()) host.giveBack(key, e);
      },
      prepare: () => {
        need = sizeLease(e, this.sizing(sentAt), call.args);
      },
    });
  }

  /** What sizes a lease as it is sent: the time (when it was queued, if the clock fails: only the rate depends on it), whether it may hold a surplus, the demand to cover. */
  private sizing(sentAt: number): LeaseSizing {
    const host = this.host;
    const t = host.readTime();
    const now = t instanceof FloodgateError ? sentAt : Math.max(sentAt, t);
    return { now, live: host.live(), rttMs: this.rttMs, leaseMs: host.leaseMs, shareMilli: host.shareMilli };
  }

  private answered(key: string, e: Entry, sentAt: number, need: number, error: unknown, reply: unknown): void {
    const host = this.host;
    e.inFlight = false;
    const parsed = error == null ? parseLease(reply) : toStoreError(error, host.name);
    if (parsed instanceof FloodgateError) {
      rejectAll(e, parsed);
      return;
    }
    if (host.closed()) {
      rejectAll(e, closedError());
      return;
    }
    const t = host.readTime();
    if (t instanceof FloodgateError) {
      rejectAll(e, t);
      return;
    }
    this.rttMs += (t - sentAt - this.rttMs) / 5;
    if (absorbReply(e, sentAt, t, parsed, true, host.clocked, host.counters)) host.giveBack(key, e);
    if (parsed.blockLeft !== 0) {
      const outcome = blocked(msUntil(e.blockedUntil, t), msUntil(e.endsBy, t));
      const waiters = e.waiters;
      e.waiters = [];
      for (const w of waiters) w.resolve(outcome);
      return;
    }
    const blockMs = answerWaiters(e, t, parsed, need);
    if (blockMs > 0 && e.policy !== undefined) {
      // Best effort, as returns are: a failed block leaves the refusal standing, and the next consume asks Redis.
      host.control({ kind: 'block', key, amount: blockMs, policy: e.policy }).catch(() => {});
    }
    // A lease granted before the subscription went down and answered after it: the waiting consumes it
    // was asked for are served (Redis counted them before anything later), the surplus goes back, since
    // a revocation broadcast meanwhile would not be heard.
    if (!host.live() && e.units > 0) host.giveBack(key, e);
    if (e.waiters.length > 0) this.send(key, e);
  }
}
