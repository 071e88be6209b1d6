// Waiting for a forked test child's IPC message of one type (the hammers of the accuracy tests report this way).
import type { ChildProcess } from 'node:child_process';

/** The next message `{ type }` from `child`; rejects if the child exits first. */
export function nextMessage<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type?: string }) => {
      if (message?.type !== type) return;
      child.off('message', onMessage);
      resolve(message as T);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`child exited with ${code} before sending ${type}`)));
  });
}
