/** The gateway benchmarks' shared pieces: the upstream child they forward to, and the ready-and-stop handling of an in-process gateway. */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Forks the upstream (a child answering 200 `{}`, killed with this process) and resolves with its URL. */
export function startUpstream(): Promise<string> {
  const child = fork(fileURLToPath(new URL('../servers/gateway-upstream.ts', import.meta.url)), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  process.on('exit', () => child.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(`http://127.0.0.1:${m.port}`));
    child.once('exit', (code) => reject(new Error(`the gateway upstream exited (${code}) before listening`)));
  });
}

/** What {@link gatewayReady} needs of an in-process gateway. */
interface RunningGateway {
  readonly server: { closeAllConnections(): void };
  shutdown(): Promise<void>;
}

/** Says `ready` to the harness for an in-process gateway, and on SIGTERM/SIGINT drops its connections, shuts it down and exits 0. */
export function gatewayReady(gateway: RunningGateway): void {
  process.stdout.write('ready\n');
  const stop = (): void => {
    gateway.server.closeAllConnections();
    gateway.shutdown().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
