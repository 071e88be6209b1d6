/** envoyproxy/ratelimit as a benchmark server: the rls scenario's reference, on the run's Redis, with the scenario's limits. */
import { fileURLToPath } from 'node:url';
import { startReference } from '../rls/reference.js';
import { benchEnv, requireRedisUrl, runServer } from '../lib/serve.js';

const CONFIG = fileURLToPath(new URL('../rls/bench-config/', import.meta.url));

runServer(async () => {
  const env = benchEnv();
  // RLS_REFERENCE_ENV: extra settings of the service as JSON, e.g. its over-limit local cache.
  const extra = JSON.parse(process.env.RLS_REFERENCE_ENV ?? '{}') as Record<string, string>;
  // Not detached: the service stays in this process's group, which the harness stops as a whole.
  const reference = await startReference({ config: CONFIG, redisUrl: requireRedisUrl(env), grpcPort: env.port, env: extra });
  process.stdout.write('ready\n');
  let stopping = false;
  const shutdown = (): void => {
    if (stopping) return;
    stopping = true;
    void reference.stop().finally(() => process.exit(0));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  reference.child.once('exit', (code, signal) => {
    if (stopping) return;
    process.stderr.write(`envoyproxy/ratelimit exited (${code ?? signal})\n${reference.output()}\n`);
    process.exit(1);
  });
});
