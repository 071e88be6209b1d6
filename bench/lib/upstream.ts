/** The app service behind the gateway benchmarks: forks bench/servers/gateway-upstream.ts and resolves with its URL. */
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
