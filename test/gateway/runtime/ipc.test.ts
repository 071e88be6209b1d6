// The tagged request/answer calls the --workers gateway makes over node:cluster IPC (metrics, readiness), on an in-process
// channel that serialises like the real one; the real channel is exercised end to end in cli/lifecycle.test.ts.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { answerCalls, IpcCaller, type IpcPort } from '../../../src/gateway/runtime/ipc.js';

/** Two connected ports; messages go through JSON, as on node's IPC channel, and arrive in a later turn. */
function channel(): { a: IpcPort; b: IpcPort; close(): void; failSends(error: Error): void } {
  const inboxes = [new EventEmitter(), new EventEmitter()];
  let open = true;
  let sendError: Error | undefined;
  const port = (self: number): IpcPort => ({
    send(message, callback) {
      const error = sendError ?? (open ? null : new Error('Channel closed'));
      const text = JSON.stringify(message);
      setImmediate(() => {
        if (error === null) inboxes[1 - self]!.emit('message', JSON.parse(text));
        callback(error);
      });
    },
    onMessage: (listener) => void inboxes[self]!.on('message', listener),
    connected: () => open,
  });
  return {
    a: port(0),
    b: port(1),
    close: () => void (open = false),
    failSends: (error) => void (sendError = error),
  };
}

/** Holds the event loop open until `promise` settles: a call's timer is unref'd, as a shutdown must not wait for it. */
function held<T>(promise: Promise<T>): Promise<T> {
  const timer = setInterval(() => undefined, 1000);
  return promise.finally(() => clearInterval(timer));
}

describe('gateway IPC calls', () => {
  it("answers with the handler's value; null survives; other tags and foreign messages are ignored", async () => {
    const { a, b } = channel();
    answerCalls('t.one', b, () => ({ body: 'metrics' }));
    answerCalls('t.two', b, () => null);
    // Foreign traffic on the same channel, as prom-client and the cluster store send: nobody answers it, nothing throws.
    a.send({ type: 'prom-client:getMetricsReq', requestId: 1 }, () => undefined);
    a.send({ 't.one': 'not an envelope' }, () => undefined);
    assert.deepEqual(await new IpcCaller('t.one', a, 1000, 'the primary').call(), { body: 'metrics' });
    assert.equal(await new IpcCaller('t.two', a, 1000, 'the primary').call(), null);
  });

  it('reports a handler that throws or rejects, naming the other end', async () => {
    const { a, b } = channel();
    answerCalls('sync', b, () => {
      throw new Error('boom');
    });
    answerCalls('async', b, () => Promise.reject(new Error('later boom')));
    await assert.rejects(new IpcCaller('sync', a, 1000, 'worker 3').call(), /^Error: worker 3 failed to answer: boom$/);
    await assert.rejects(new IpcCaller('async', a, 1000, 'worker 3').call(), /^Error: worker 3 failed to answer: later boom$/);
  });

  it('gives up after the timeout when nobody answers, and ignores the late answer', async () => {
    const { a, b } = channel();
    let release!: () => void;
    answerCalls('slow', b, () => new Promise<string>((resolve) => (release = () => resolve('late'))));
    const caller = new IpcCaller('slow', a, 50, 'worker 1');
    await assert.rejects(held(caller.call()), /^Error: worker 1 did not answer within 0\.05 s$/);
    release();
    answerCalls('fast', b, () => 'ok');
    assert.equal(await new IpcCaller('fast', a, 1000, 'worker 1').call(), 'ok', 'the channel still works');
  });

  it('rejects at once on a closed channel, on a failed send, and on close() while waiting', async () => {
    const closed = channel();
    closed.close();
    await assert.rejects(new IpcCaller('x', closed.a, 1000, 'the primary').call(), /^Error: the IPC channel to the primary is closed$/);

    const failing = channel();
    failing.failSends(new Error('write EPIPE'));
    await assert.rejects(new IpcCaller('x', failing.a, 1000, 'worker 2').call(), /^Error: could not send to worker 2: write EPIPE$/);

    const { a, b } = channel();
    answerCalls('never', b, () => new Promise(() => undefined));
    const caller = new IpcCaller('never', a, 10_000, 'worker 4');
    const started = Date.now();
    const waiting = held(caller.call());
    setTimeout(() => caller.close('exited'), 20);
    await assert.rejects(waiting, /^Error: worker 4 exited$/);
    assert.ok(Date.now() - started < 1000, 'rejected when closed, not at the timeout');
  });
});
