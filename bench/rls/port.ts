/** Waits until a server process listens on a TCP port of 127.0.0.1, or fails when the process exits first. */
import type { ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Polls every 50 ms; `child`, when given, is the process expected to listen. Neither server under comparison prints a line of a
 * known format when its gRPC listener is up, but both accept connections
 * only once it is.
 */
export async function waitForPort(port: number, child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child !== undefined && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`the process exited (${child.exitCode ?? child.signalCode}) before listening on port ${port}`);
    }
    if (await canConnect(port)) return;
    if (Date.now() > deadline) throw new Error(`nothing listened on port ${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
