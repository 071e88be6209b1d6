/** Under `--workers`: the primary's admin API, asking every worker and answering as one process would. */
/**
 * The primary keeps the admin listener (token, Host check, body and time limits) and asks each listening worker
 * over IPC; see docs/gateway.md ("Admin API under --workers") for what each answer is made of.
 */
import type { Worker } from 'node:cluster';
import type { IncomingMessage } from 'node:http';
import { LIMITED_TOP_DEFAULT, LIMITED_TOP_MAX, type AdminAnswer } from '../admin/admin-api.js';
import { readBodyText } from '../admin/admin-http.js';
import type { DashboardStats } from '../admin/dashboard-stats.js';
import { answerCalls, IpcCaller, workerPort } from '../runtime/ipc.js';
import { ADMIN_STATE_TAG, ADMIN_TAG, type AdminCall, type AdminState } from './admin-calls.js';
import { mergeKeyState, mergeLimited, mergeStats } from './admin-merge.js';

/** A worker that did not answer: its id and pid, and why (it exited, did not answer in time, could not be reached). */
export interface MissingWorker {
  readonly worker: number;
  readonly pid: number | undefined;
  readonly error: string;
}

type Reply = { readonly worker: number; readonly value: unknown } | ({ readonly value?: undefined } & MissingWorker);

/** What a path under /admin/ is, for how the workers' answers combine. */
function kindOf(method: string | undefined, path: string): 'limited' | 'key' | 'override-write' | 'other' {
  const parts = path.slice('/admin/'.length).split('/');
  if (parts.length === 1 && parts[0] === 'limited') return 'limited';
  if (parts[0] !== 'rules') return 'other';
  if (parts[2] === 'keys' && (parts.length === 4 || parts.length === 5)) return 'key';
  if (parts[2] === 'policies' && parts[4] === 'keys' && (parts.length === 6 || parts.length === 7)) return 'key';
  if (parts[2] === 'overrides' && parts.length === 4 && (method === 'PUT' || method === 'DELETE')) return 'override-write';
  return 'other';
}

/**
 * In the primary: the listening workers, asked for each admin request.
 *
 * Every request goes to every worker at once, and each runs it on its own
 * rules as one process would: a reset, block or unblock acts on the shared
 * store (again in each worker: the same result, as if done once at the last
 * of them, within a few ms) and on each worker's in-memory blocks, so the
 * next request is decided alike whichever worker takes it. Counts come from
 * the lowest-id worker's answer (the store is shared); in-memory blocks are
 * the longest any worker holds; `/admin/limited` is the union. An override
 * write goes to that worker first, which writes the Redis hash when the rule
 * has one, and then to the others, so a refused value changes nothing.
 *
 * A worker that exits, hangs, or is starting (at start-up, or in place of
 * one that exited) is left out of the answer and named in its
 * `missingWorkers`; the answer waits at most `timeoutMs`.
 */
export class AdminFanout {
  private readonly workers = new Map<number, { readonly caller: IpcCaller; readonly pid: number | undefined }>();
  /** Workers that exited and for which no replacement was forked yet, oldest first. */
  private readonly gone: MissingWorker[] = [];
  /** Workers forked and not yet listening, by id: named as starting, or as the exited worker each replaces. */
  private readonly starting = new Map<number, MissingWorker>();

  /** @param timeoutMs - how long a worker has to answer one call */
  constructor(private readonly timeoutMs: number) {}

  /**
   * Wires `worker` (just forked): answers its call for the admin state of
   * the workers already serving. Until it listens, answers name it as
   * starting, or name the exited worker it replaces.
   */
  forked(worker: Worker): void {
    answerCalls(ADMIN_STATE_TAG, workerPort(worker), () => this.stateOfSiblings());
    const id = worker.id;
    this.starting.set(id, this.gone.shift() ?? { worker: id, pid: worker.process.pid, error: `worker ${id} is starting` });
  }

  /** Asks `worker` from its first 'listening' event on. */
  listeningOn(worker: Worker): void {
    if (this.workers.has(worker.id)) return;
    this.workers.set(worker.id, {
      caller: new IpcCaller(ADMIN_TAG, workerPort(worker), this.timeoutMs, `worker ${worker.id}`),
      pid: worker.process.pid,
    });
    this.starting.delete(worker.id);
  }

  /** Stops asking `worker`: its calls in flight fail at once, and answers name it until a replacement listens. */
  exited(worker: Worker, code: number | null, signal: string | null): void {
    const how = signal === null ? `exited with code ${code ?? '?'}` : `was killed by ${signal}`;
    const entry = this.workers.get(worker.id);
    entry?.caller.close(how);
    this.workers.delete(worker.id);
    const replaced = this.starting.get(worker.id);
    this.starting.delete(worker.id);
    // A worker that died before it listened still stands for the one it replaced, if any.
    const named = replaced?.worker !== worker.id && replaced !== undefined ? replaced : undefined;
    this.gone.push(
      named ?? { worker: worker.id, pid: entry?.pid ?? worker.process.pid, error: `worker ${worker.id} ${how}; another is starting` },
    );
  }

  /** The admin API's answerer (see {@link AdminAnswerer}): reads the body, asks the workers, puts their answers together. */
  readonly answer = async (req: IncomingMessage, path: string, query: URLSearchParams): Promise<AdminAnswer> => {
    let body: string | undefined;
    try {
      body = await readBodyText(req);
    } catch (error) {
      return { status: 400, body: { error: `the body could not be read: ${(error as Error).message}`, field: 'body' } };
    }
    const kind = kindOf(req.method, path);
    const top = kind === 'limited' ? limitedTop(query) : undefined;
    // Each worker lists its longest list, so that the union's top keys are the whole gateway's.
    const asked = new URLSearchParams(query);
    if (top !== undefined) asked.set('top', String(LIMITED_TOP_MAX));
    const call = (lead: boolean): AdminCall => ({
      op: 'api',
      method: req.method ?? 'GET',
      path,
      query: asked.toString(),
      body: body ?? null,
      lead,
    });
    const ids = this.ids();
    if (ids.length === 0) return this.noAnswer([]);
    if (kind === 'override-write') {
      const [lead] = await this.ask([ids[0]!], call(true));
      if (lead!.value === undefined) return this.noAnswer([lead as MissingWorker], 'the override may or may not be written; GET it to see');
      const answer = lead!.value as AdminAnswer;
      if (answer.status >= 300) return answer;
      const rest = await this.ask(ids.slice(1), call(false));
      return this.withMissing(answer, rest);
    }
    const replies = await this.ask(ids, (id) => call(id === ids[0]));
    const answered = replies.filter((r) => r.value !== undefined);
    if (answered.length === 0) return this.noAnswer(replies as MissingWorker[]);
    const first = answered[0]!.value as AdminAnswer;
    // Only answers of the same success are put together; a worker whose store failed (503) adds nothing to a 200.
    const bodies = answered
      .map((r) => r.value as AdminAnswer)
      .filter((a) => a.status === 200)
      .map((a) => a.body);
    let merged = first;
    if (first.status === 200 && top !== undefined) merged = { ...first, body: mergeLimited(bodies, top) };
    if (first.status === 200 && kind === 'key') merged = { ...first, body: mergeKeyState(first.body, bodies.slice(1)) };
    return this.withMissing(merged, replies);
  };

  /** The dashboard's numbers over every worker that answers, naming those that did not; throws when none does. */
  readonly stats = async (): Promise<DashboardStats & { readonly missingWorkers?: readonly MissingWorker[] }> => {
    const at = Date.now();
    const replies = await this.ask(this.ids(), { op: 'stats' });
    const answered = replies.filter((r) => r.value !== undefined).map((r) => r.value as DashboardStats);
    const missing = this.missing(replies);
    if (answered.length === 0) throw new Error(`no worker answered: ${missing.map((m) => m.error).join('; ') || 'none is listening'}`);
    const stats = mergeStats(answered, at);
    return missing.length === 0 ? stats : { ...stats, missingWorkers: missing };
  };

  /** The listening workers' ids, lowest first. */
  private ids(): number[] {
    return [...this.workers.keys()].sort((a, b) => a - b);
  }

  /** Asks each of `ids` (all at once); each reply is its answer, or why there is none. */
  private ask(ids: readonly number[], call: AdminCall | ((id: number) => AdminCall)): Promise<Reply[]> {
    return Promise.all(
      ids.map((id) => {
        const entry = this.workers.get(id);
        if (entry === undefined) return { worker: id, pid: undefined, error: `worker ${id} exited` };
        return entry.caller.call(typeof call === 'function' ? call(id) : call).then(
          (value): Reply => ({ worker: id, value }),
          (error: unknown): Reply => ({ worker: id, pid: entry.pid, error: (error as Error).message }),
        );
      }),
    );
  }

  /** The workers missing from `replies`, those gone and not yet replaced, and those starting. */
  private missing(replies: readonly Reply[]): MissingWorker[] {
    const missing = replies
      .filter((r): r is Reply & MissingWorker => r.value === undefined)
      .map(({ worker, pid, error }) => ({ worker, pid, error }));
    for (const g of [...this.gone, ...this.starting.values()]) if (!missing.some((m) => m.worker === g.worker)) missing.push(g);
    return missing;
  }

  /** `answer`, naming in `missingWorkers` the workers it lacks. */
  private withMissing(answer: AdminAnswer, replies: readonly Reply[]): AdminAnswer {
    const missing = this.missing(replies);
    if (missing.length === 0 || typeof answer.body !== 'object' || answer.body === null || Array.isArray(answer.body)) return answer;
    return { ...answer, body: { ...answer.body, missingWorkers: missing } };
  }

  /** 503 when no worker answered, naming each. */
  private noAnswer(replies: readonly Reply[], more?: string): AdminAnswer {
    const missing = this.missing(replies);
    const why = missing.map((m) => m.error).join('; ') || 'no worker is listening yet';
    return {
      status: 503,
      body: { error: `no worker answered (${why})${more === undefined ? '' : `; ${more}`}; try again.`, missingWorkers: missing },
    };
  }

  /** The admin state of the serving worker with the lowest id that answers; null when none does. */
  private async stateOfSiblings(): Promise<AdminState | null> {
    const replies = await this.ask(this.ids(), { op: 'state' });
    return (replies.find((r) => r.value !== undefined)?.value as AdminState | undefined) ?? null;
  }
}

/** The `top` an `/admin/limited` request asks for; undefined when it is not a valid one (a worker then answers the 400). */
function limitedTop(query: URLSearchParams): number | undefined {
  const v = query.get('top');
  if (v === null) return LIMITED_TOP_DEFAULT;
  return /^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= LIMITED_TOP_MAX ? Number(v) : undefined;
}
