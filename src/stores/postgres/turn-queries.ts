/** TurnQueries: the PostgresStore calls of one event-loop turn, sent together once the turn ends, with one timeout. */
import { ErrorCode, FloodgateError, toStoreError } from '../../core/errors.js';
import type { Outcome } from '../../core/policy.js';
import type { PostgresClient, PostgresQuery } from './postgres-client.js';

/** One caller waiting on an outcome. */
interface Waiter {
  resolve(outcome: Outcome): void;
  reject(error: FloodgateError): void;
}

/**
 * Operations on one key under one policy, applied in arrival order in one step of the apply function. `policy` is the
 * batch's policy columns (algorithm code, limit, bucket size, initial tokens, window, period ends, block).
 */
export interface ApplyBatch {
  readonly key: string;
  readonly policy: readonly [number, number, number, number, number, number, number, number];
  readonly kinds: number[];
  readonly amounts: number[];
  /** Each operation's time from the store's clock, or null for the server's. */
  readonly nows: (number | null)[];
  readonly waiters: Waiter[];
}

/** A call that is its own query (a composite, a slot call): its answer gets the first row, or the error. */
export interface OwnQuery {
  readonly query: PostgresQuery;
  answer(error: FloodgateError | undefined, row: Record<string, unknown> | undefined): void;
}

/** How {@link TurnQueries} reaches PostgreSQL and words its failures. */
export interface TurnQueriesOptions {
  readonly client: PostgresClient;
  /** The apply function's prepared statement name and text (13 array parameters, one bigint[] column `r`). */
  readonly apply: { readonly name: string; readonly text: string };
  readonly timeoutMs: number;
  /** Resolves once the schema exists (rejects when it could not be made); awaited before a turn is sent. */
  ready(): Promise<void>;
  /** Told of every failed query, so the owner can make the schema again when it is missing. */
  onError(error: unknown): void;
}

/** Operations per apply query: a bigger one would hold its row locks, and other callers, for longer. */
const MAX_OPS_PER_QUERY = 1000;
/** Numbers per outcome in the apply and composite functions' arrays. */
const OUTCOME_WIDTH = 5;

/**
 * Queues calls and sends them when the turn ends: every apply batch of the turn in one query (the apply function
 * takes many keys), each other call in its own, all at once. On a `pg.Client` they run in order on its connection; on
 * a `pg.Pool` on several connections at once (calls of one turn are concurrent: any order is one they could have had).
 */
export class TurnQueries {
  private batches: ApplyBatch[] = [];
  private ops = 0;
  private others: OwnQuery[] = [];
  private immediate: NodeJS.Immediate | undefined;
  /** Called when a turn's queue is taken, so the owner stops adding to batches on their way. */
  onTake: () => void = () => {};
  private readonly inFlight = new Set<{ fail(error: FloodgateError): void }>();

  constructor(private readonly options: TurnQueriesOptions) {}

  /** Queues a batch for this turn's apply query. */
  pushBatch(batch: ApplyBatch): void {
    this.batches.push(batch);
    this.immediate ??= setImmediate(this.flush);
  }

  /** Counts an operation added to a queued batch; a full query's worth is sent at once, so no query grows unbounded. */
  countOp(): void {
    if (++this.ops >= MAX_OPS_PER_QUERY) this.flushNow();
  }

  /** Queues a call of its own. */
  pushQuery(call: OwnQuery): void {
    this.others.push(call);
    this.immediate ??= setImmediate(this.flush);
  }

  /** Answers every queued and in-flight call with `error`, without sending the queued ones. */
  abort(error: FloodgateError): void {
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.immediate = undefined;
    const { batches, others } = this.take();
    for (const b of batches) for (const w of b.waiters) w.reject(error);
    for (const o of others) safely(() => o.answer(error, undefined));
    for (const flight of [...this.inFlight]) flight.fail(error);
  }

  private flushNow(): void {
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.flush();
  }

  private take(): { batches: ApplyBatch[]; others: OwnQuery[] } {
    const taken = { batches: this.batches, others: this.others };
    this.batches = [];
    this.others = [];
    this.ops = 0;
    this.onTake();
    return taken;
  }

  private readonly flush = (): void => {
    this.immediate = undefined;
    const { batches, others } = this.take();
    if (batches.length > 0) this.send(applyQuery(this.options.apply, batches), (error, row) => answerBatches(batches, error, row));
    for (const o of others) this.send(o.query, (error, row) => o.answer(error, row));
  };

  /** Sends one query once the schema is ready; answers it exactly once: its first row, its error or STORE_TIMEOUT. */
  private send(query: PostgresQuery, answer: (error: FloodgateError | undefined, row: Record<string, unknown> | undefined) => void): void {
    let done = false;
    const flight = {
      fail: (error: FloodgateError): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.inFlight.delete(flight);
        safely(() => answer(error, undefined));
      },
    };
    const timer = setTimeout(
      () =>
        flight.fail(
          new FloodgateError(
            ErrorCode.STORE_TIMEOUT,
            `postgres store did not answer within ${this.options.timeoutMs} ms; raise PostgresStore timeoutMs if PostgreSQL is slow but healthy.`,
          ),
        ),
      this.options.timeoutMs,
    );
    this.inFlight.add(flight);
    this.options
      .ready()
      .then(() => this.options.client.query(query))
      .then(
        (result) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          this.inFlight.delete(flight);
          safely(() => answer(undefined, result.rows[0] as Record<string, unknown> | undefined));
        },
        (error: unknown) => {
          this.options.onError(error);
          flight.fail(toStoreError(error, 'postgres'));
        },
      );
  }
}

/** The apply function's call for `batches`: per batch its key, policy columns and first operation, then the operations. */
function applyQuery(apply: TurnQueriesOptions['apply'], batches: readonly ApplyBatch[]): PostgresQuery {
  const columns: unknown[][] = Array.from({ length: 13 }, () => []);
  for (const b of batches) {
    columns[0]!.push(b.key);
    for (let i = 0; i < 8; i++) columns[i + 1]!.push(b.policy[i]);
    columns[9]!.push(columns[10]!.length + 1);
    columns[10]!.push(...b.kinds);
    columns[11]!.push(...b.amounts);
    columns[12]!.push(...b.nows);
  }
  return { name: apply.name, text: apply.text, values: columns };
}

function answerBatches(batches: readonly ApplyBatch[], error: FloodgateError | undefined, row: Record<string, unknown> | undefined): void {
  const count = batches.reduce((n, b) => n + b.waiters.length, 0);
  const outcomes = error ?? decodeOutcomes(row?.r, count);
  let i = 0;
  for (const b of batches) {
    for (const w of b.waiters) {
      if (outcomes instanceof FloodgateError) w.reject(outcomes);
      else w.resolve(outcomes[i]!);
      i++;
    }
  }
}

/** -1 is how the functions spell Infinity (blocked until unblocked). */
function ms(value: number): number {
  return value === -1 ? Infinity : value;
}

/** Turns a function's bigint[] (five numbers per outcome) into outcomes, or a STORE_ERROR when it has the wrong shape. */
export function decodeOutcomes(reply: unknown, count: number): Outcome[] | FloodgateError {
  const values = Array.isArray(reply) ? reply.map(Number) : [];
  if (values.length !== count * OUTCOME_WIDTH || !values.every(Number.isSafeInteger)) {
    return new FloodgateError(
      ErrorCode.STORE_ERROR,
      `postgres store failed: the function answered ${JSON.stringify(reply)?.slice(0, 200)} where ${count * OUTCOME_WIDTH} integers were expected.`,
    );
  }
  const outcomes: Outcome[] = new Array(count);
  for (let i = 0, o = 0; i < count; i++, o += OUTCOME_WIDTH) {
    outcomes[i] = {
      allowed: values[o] === 1,
      remaining: values[o + 1]!,
      resetMs: ms(values[o + 2]!),
      retryAfterMs: ms(values[o + 3]!),
      emptyMs: ms(values[o + 4]!),
    };
  }
  return outcomes;
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // A handler bug must not leave the other calls of the turn unanswered.
  }
}
