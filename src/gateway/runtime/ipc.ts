/** Under `--workers`: tagged request/answer calls over a node:cluster IPC channel, in either direction. */
/**
 * They are kept apart from prom-client's and the cluster store's messages on that channel.
 */
import type { Worker } from 'node:cluster';

/** One end of an IPC channel: the worker's `process`, or a `Worker` in the primary. */
export interface IpcPort {
  /** Sends `message`; `callback` gets the error if it could not be sent. */
  send(message: object, callback: (error: Error | null) => void): void;
  /** Calls `listener` with every message that arrives. */
  onMessage(listener: (message: unknown) => void): void;
  /** False once the channel is closed. */
  connected(): boolean;
}

/** The worker's end of its channel to the primary. */
export function primaryPort(): IpcPort {
  return {
    send: (message, callback) => process.send!(message, undefined, undefined, callback),
    onMessage: (listener) => process.on('message', listener),
    connected: () => process.connected && typeof process.send === 'function',
  };
}

/** The primary's end of its channel to `worker`. */
export function workerPort(worker: Worker): IpcPort {
  return {
    send: (message, callback) => worker.send(message, undefined, undefined, callback),
    onMessage: (listener) => worker.on('message', listener),
    connected: () => worker.isConnected(),
  };
}

/** What goes over the channel: a call, or the answer to one (its value, or why there is none). */
interface Envelope {
  readonly kind: 'call' | 'answer';
  readonly id: number;
  readonly value?: unknown;
  readonly error?: string;
}

/** The envelope inside `message` when it is one of `tag`'s, else undefined. */
function envelope(message: unknown, tag: string): Envelope | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const inner = (message as Record<string, unknown>)[tag] as Partial<Envelope> | undefined;
  if (inner === null || typeof inner !== 'object' || typeof inner.id !== 'number') return undefined;
  return inner as Envelope;
}

function ignoreSendError(): void {}

/**
 * Answers calls tagged `tag` that arrive on `port` with what `handler`
 * returns for the call's value (or its rejection's message). The value must
 * survive the IPC channel's JSON serialisation: use null rather than undefined.
 */
export function answerCalls(tag: string, port: IpcPort, handler: (value: unknown) => unknown): void {
  port.onMessage((message) => {
    const call = envelope(message, tag);
    if (call === undefined || call.kind !== 'call') return;
    const reply = (answer: Omit<Envelope, 'kind' | 'id'>): void => {
      // The other end may have exited meanwhile; the callback keeps a failed send from becoming an 'error' event.
      if (port.connected()) port.send({ [tag]: { kind: 'answer', id: call.id, ...answer } }, ignoreSendError);
    };
    new Promise((resolve) => resolve(handler(call.value))).then(
      (value) => reply({ value }),
      (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
}

/**
 * Makes calls tagged `tag` on `port`, each answered by the other end's
 * {@link answerCalls} within `timeoutMs` or rejected.
 */
export class IpcCaller {
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }
  >();
  private listening = false;

  /**
   * @param tag - marks this kind of call's messages on the shared channel
   * @param port - the channel
   * @param timeoutMs - how long a call waits for its answer
   * @param peer - names the other end in errors ("the primary", "worker 3")
   */
  constructor(
    private readonly tag: string,
    private readonly port: IpcPort,
    private readonly timeoutMs: number,
    private readonly peer: string,
  ) {}

  /**
   * The other end's answer to `value` (none: undefined; it crosses the channel as JSON).
   * @throws Error when the channel is closed, the other end does not answer in time, or its handler failed
   */
  call(value?: unknown): Promise<unknown> {
    if (!this.port.connected()) return Promise.reject(new Error(`the IPC channel to ${this.peer} is closed`));
    this.listen();
    const id = this.nextId;
    this.nextId = this.nextId >= 2 ** 31 ? 1 : this.nextId + 1;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${this.peer} did not answer within ${this.timeoutMs / 1000} s`));
      }, this.timeoutMs);
      // Not holding the process open: a call in flight must not delay a shutdown.
      timer.unref();
      this.waiting.set(id, { resolve, reject, timer });
      this.port.send({ [this.tag]: { kind: 'call', id, ...(value === undefined ? {} : { value }) } satisfies Envelope }, (error) => {
        if (!error) return;
        // E.g. EPIPE from a worker killed a moment ago, before its 'exit' event: say who could not be reached.
        this.takeWaiting(id)?.reject(new Error(`could not send to ${this.peer}: ${error.message}`));
      });
    });
  }

  /** Rejects every call still waiting: the other end is gone, so none of them will be answered. */
  close(reason: string): void {
    for (const id of [...this.waiting.keys()]) this.takeWaiting(id)?.reject(new Error(`${this.peer} ${reason}`));
  }

  private listen(): void {
    if (this.listening) return;
    this.listening = true;
    this.port.onMessage((message) => {
      const answer = envelope(message, this.tag);
      if (answer === undefined || answer.kind !== 'answer') return;
      const call = this.takeWaiting(answer.id);
      if (call === undefined) return;
      if (answer.error === undefined) call.resolve(answer.value);
      else call.reject(new Error(`${this.peer} failed to answer: ${answer.error}`));
    });
  }

  /** Removes call `id` from the waiting ones and stops its timer; undefined when it was already answered. */
  private takeWaiting(id: number): { resolve: (value: unknown) => void; reject: (error: Error) => void } | undefined {
    const call = this.waiting.get(id);
    if (call === undefined) return undefined;
    this.waiting.delete(id);
    clearTimeout(call.timer);
    return call;
  }
}
