/** Shared pieces of the gateway benches: the upstream they forward to; ready-and-stop of an in-process gateway. */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * The upstream's URL: the harness's own (`FLOODGATE_BENCH_UPSTREAM_URL`, a
 * scenario with `upstream: true`, so it is neither on this process's core nor
 * in its CPU count), else a forked child answering 200 `{}`, killed with this process.
 */
export function startUpstream(): Promise<string> {
  const given = process.env.FLOODGATE_BENCH_UPSTREAM_URL;
  if (given) return Promise.resolve(given);
  // Without FLOODGATE_BENCH_PORT (this server's own port, which the child would inherit): it picks a free one.
  const { FLOODGATE_BENCH_PORT: _own, ...env } = process.env;
  const child = fork(fileURLToPath(new URL('../servers/gateway-upstream.ts', import.meta.url)), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env,
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
