/** The overload scenario's server under test: the floodgate gateway in front of the simulated upstream, with or without `overload:`. */
import { benchEnv, importDist, runServer } from '../lib/serve.js';
import { gatewayReady } from '../lib/upstream.js';

type Gw = typeof import('../../dist/esm/gateway/index.js');

/**
 * The gateway as `floodgate serve` runs it, no rules, forwarding to
 * `FLOODGATE_BENCH_UPSTREAM_URL` (the phase's simulated upstream), its
 * metrics on `127.0.0.1:$OVERLOAD_ADMIN_PORT`, and `OVERLOAD_SECTION` (YAML:
 * the `overload:` section, or empty for no limiter) appended to its config.
 * Everything else is the gateway's defaults, the same in every phase.
 */
runServer(async () => {
  const env = benchEnv();
  const upstream = process.env.FLOODGATE_BENCH_UPSTREAM_URL;
  if (!upstream) throw new Error('FLOODGATE_BENCH_UPSTREAM_URL is not set: bench/overload/run.ts starts the upstream first.');
  const adminPort = Number(process.env.OVERLOAD_ADMIN_PORT);
  if (!Number.isInteger(adminPort) || adminPort <= 0) throw new Error('OVERLOAD_ADMIN_PORT must be a free port for /metrics.');
  const gw = await importDist<Gw>('esm/gateway/index.js', 'the gateway (src/gateway)');
  const deps = await gw.loadGatewayDeps();
  const log = gw.createLogger(deps.pino, 'silent');
  const yaml = [
    `upstream: ${upstream}`,
    `listen: 127.0.0.1:${env.port}`,
    `admin: 127.0.0.1:${adminPort}`,
    'drainTimeout: 1s',
    'rules: []',
    process.env.OVERLOAD_SECTION ?? '',
  ].join('\n');
  const settings = await gw.parseConfigText(yaml, 'gateway.yaml', { watch: false });
  const gateway = await gw.Gateway.start(settings, deps, log);
  gatewayReady(gateway);
});
