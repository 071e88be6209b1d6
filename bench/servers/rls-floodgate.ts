/** floodgate's RLS server (`floodgate serve --grpc … --rls-config …`, from the run's copy of dist/) as a benchmark server for the rls scenario. */
import { fileURLToPath } from 'node:url';
import { waitForPort } from '../rls/port.js';
import { benchEnv, importDist, requireRedisUrl, runServer } from '../lib/serve.js';

type Cli = typeof import('../../dist/esm/gateway/cli/cli.js');

const CONFIG = fileURLToPath(new URL('../rls/bench-config/', import.meta.url));

runServer(async () => {
  const env = benchEnv();
  // RLS_FLAGS: the variant's own `floodgate serve` flags as a JSON array (e.g. ["--local-first"]).
  const flags = JSON.parse(process.env.RLS_FLAGS ?? '[]') as string[];
  const cli = await importDist<Cli>('esm/gateway/cli/cli.js', 'the gateway CLI (src/gateway/cli)');
  const args = ['serve', '--grpc', `127.0.0.1:${env.port}`, '--rls-config', CONFIG, '--redis', requireRedisUrl(env), ...flags];
  // In this process, as bin/floodgate.mjs runs it; the port, not main()'s promise, says when it listens.
  void cli.main(args).then(
    (code) => {
      if (code === 0) return;
      process.stderr.write(`floodgate ${args.join(' ')} ended with code ${code}\n`);
      process.exit(1);
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
  await waitForPort(env.port, undefined, 20_000);
  process.stdout.write('ready\n');
  // The server drains on SIGTERM by itself; this only bounds the wait, as the harness kills after 3 s anyway.
  process.once('SIGTERM', () => setTimeout(() => process.exit(0), 2000).unref());
});
