// Starts an in-process gateway with its rate limit service (from YAML texts) for the RLS tests, with a client and the log lines at hand.
import { writeFileSync } from 'node:fs';
import { loadGatewayDeps } from '../../../src/gateway/runtime/optional-deps.js';
import { RlsServer } from '../../../src/gateway/rls/rls-server.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { GrpcSettings, GrpcTlsSettings } from '../../../src/gateway/config/settings.js';
import { parseMetrics, startGateway, writeTemp } from './harness.js';
import { rlsClient, type RlsClient } from './rls-client.js';

/** A running gateway with its rate limit service. */
export interface RlsFixture {
  readonly gateway: Gateway;
  readonly rls: RlsServer;
  readonly client: RlsClient;
  /** The rate limit config file. */
  readonly file: string;
  /** Log lines at warn and above, and the service's info lines. */
  readonly logs: Array<Record<string, unknown>>;
  /** Rewrites the rate limit config file. */
  write(text: string): void;
  /** The gateway's metrics, parsed. */
  metrics(): Promise<Map<string, number>>;
  stop(): Promise<void>;
}

/** The `grpc` options beside where it listens, its config and TLS. */
export type RlsOptions = Omit<GrpcSettings, 'listen' | 'config' | 'tls'>;

/** Starts a gateway from `gatewayYaml` (rules may be left out) and a rate limit service on `rlsYaml` (with `tls`, over TLS; with `options`, its `grpc` options). */
export async function startRls(
  rlsYaml: string,
  gatewayYaml = 'rules: []\n',
  tls?: GrpcTlsSettings,
  options: RlsOptions = {},
): Promise<RlsFixture> {
  const file = writeTemp('ratelimit.yaml', rlsYaml);
  const deps = await loadGatewayDeps();
  const logs: Array<Record<string, unknown>> = [];
  const gateway = await startGateway(gatewayYaml, {}, logs);
  const mod = deps.pino as unknown as { pino?: typeof import('pino').pino; default?: typeof import('pino').pino };
  const pino = mod.pino ?? mod.default ?? (deps.pino as unknown as typeof import('pino').pino);
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  // A service that does not start (a bad config) leaves no gateway behind to keep the test process alive.
  const rls = await RlsServer.start(
    { listen: { host: '127.0.0.1', port: 0 }, config: file, ...(tls === undefined ? {} : { tls }), ...options },
    gateway,
    deps.prom,
    log,
  ).catch(async (error: unknown) => {
    await gateway.shutdown();
    throw error;
  });
  // Over TLS the tests make their own clients, with the credentials each case needs.
  const client = rlsClient(rls.address);
  return {
    gateway,
    rls,
    client,
    file,
    logs,
    write: (text) => writeFileSync(file, text),
    metrics: async () => parseMetrics((await gateway.renderMetrics()).body),
    async stop() {
      client.close();
      await rls.close();
      await gateway.shutdown();
    },
  };
}
