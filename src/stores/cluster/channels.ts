/** The channels a ClusterStore reaches its primary over. */
/**
 * The process IPC channel (cluster, child_process, PM2), a worker thread's MessagePort, or the in-process primary.
 */
import type { MessagePort } from 'node:worker_threads';
import { localPrimary } from './local.js';
import { openPrimaryEnvelope, toPrimary, type PrimaryMessage, type WorkerMessage } from './protocol.js';
/** One way to exchange messages with the primary. */
export interface Channel {
  /** Delivers the primary's messages to `onMessage` until the returned function is called. */
  listen(onMessage: (message: PrimaryMessage) => void, onClose: () => void): () => void;
  /** Sends `message`; reports a failure to send through `onError`. */
  send(message: WorkerMessage, onError: (error: Error) => void): void;
  /** True when nothing can be sent any more. */
  isClosed(): boolean;
}

export const processChannel: Channel = {
  listen(onMessage, onClose) {
    const handler = (value: unknown): void => {
      const message = openPrimaryEnvelope(value);
      if (message) onMessage(message);
    };
    process.on('message', handler);
    process.on('disconnect', onClose);
    return () => {
      process.off('message', handler);
      process.off('disconnect', onClose);
    };
  },
  send(message, onError) {
    if (!process.connected || typeof process.send !== 'function') {
      onError(new Error('the IPC channel to the primary is closed'));
      return;
    }
    // With a callback, a send that fails reports here instead of emitting an
    // unhandled 'error' on process.
    process.send(toPrimary(message), undefined, undefined, (error: Error | null) => {
      if (error) onError(error);
    });
  },
  isClosed() {
    return !process.connected;
  },
};

// One channel per port for the port's lifetime: its 'close' watcher is
// registered once, however many stores come and go on the port.
const portChannels = new WeakMap<MessagePort, Channel>();

export function portChannel(port: MessagePort): Channel {
  const known = portChannels.get(port);
  if (known) return known;
  const channel = newPortChannel(port);
  portChannels.set(port, channel);
  return channel;
}

function newPortChannel(port: MessagePort): Channel {
  let closed = false;
  port.once('close', () => {
    closed = true;
  });
  return {
    listen(onMessage, onClose) {
      const handler = (value: unknown): void => {
        const message = openPrimaryEnvelope(value);
        if (message) onMessage(message);
      };
      port.on('message', handler);
      port.on('close', onClose);
      return () => {
        port.off('message', handler);
        port.off('close', onClose);
      };
    },
    send(message, onError) {
      try {
        port.postMessage(toPrimary(message));
      } catch (error) {
        onError(error instanceof Error ? error : new Error(String(error)));
      }
    },
    isClosed() {
      return closed;
    },
  };
}

export function localChannel(): Channel {
  let deliver: ((message: PrimaryMessage) => void) | undefined;
  // One reply function for the channel's life: the primary recognizes its
  // peers by it, to send them invalidations.
  const reply = (message: PrimaryMessage): void => deliver?.(message);
  return {
    listen(onMessage) {
      deliver = onMessage;
      return () => {
        deliver = undefined;
        localPrimary()?.forget?.(reply);
      };
    },
    send(message) {
      // Asynchronous like real IPC, so no reply re-enters the sender. With no
      // primary here (yet) the message is dropped, as IPC nobody listens to.
      queueMicrotask(() => localPrimary()?.receive(message, reply));
    },
    isClosed() {
      return false;
    },
  };
}
