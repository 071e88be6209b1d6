/** The Envoy rate limit service (RLS v3) over gRPC beside a gateway. */
/**
 * ShouldRateLimit on the gateway's store, the gRPC health protocol, metrics and live reloads of its YAML.
 */
import { existsSync } from 'node:fs';
import { ErrorCode, isFloodgateError, isStoreFailure } from '../../index.js';
import { throttled } from '../../util/throttle.js';
import type { GrpcSettings } from '../config/settings.js';
import type { Gateway } from '../serve/gateway.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { PromClient } from '../runtime/optional-deps.js';
import { loadRlsConfig, type RlsConfig } from './rls-config.js';
import { decideRls, RlsRequestError, type DecideOptions, type RlsRequestIn } from './rls-decide.js';
import { RlsLimiters } from './rls-limiters.js';
import { RlsMetrics } from './rls-metrics.js';
import { RlsReloader } from './rls-reload.js';
import { RecentCounts } from './rls-recent.js';
import { storeCountsForReadiness } from '../store/store-readiness.js';
import { dynamicMetadata } from './rls-metadata.js';
import { writeResponse, type WireOptions } from './rls-wire.js';
import { decodeHealthCheckRequest, decodeRateLimitRequest, encodeHealthCheckResponse, encodeRateLimitResponse } from './rls-codec.js';
import { readTlsFiles } from './rls-tls.js';
import { loadGrpc } from './grpc-deps.js';
import { listenHttp2 } from './rls-http2.js';
import { listenGrpcJs } from './rls-grpcjs.js';
import {
  GrpcStatus,
  HEALTH_CHECK_PATH,
  hostPort,
  SHOULD_RATE_LIMIT_PATH,
  type TlsFiles,
  type Transport,
  type UnaryReply,
} from './rls-transport.js';

/**
 * Largest ShouldRateLimit message read, in bytes (a larger one is answered
 * RESOURCE_EXHAUSTED before it is read). Envoy's requests are a few
 * hundred bytes; the most a valid request holds (64 descriptors of 32
 * entries) is far more than any route makes.
 */
const MAX_MESSAGE_BYTES = 256 * 1024;
/** Least time between two logged internal errors; the ones in between are counted in the next line. */
const ERROR_LOG_EVERY_MS = 10_000;

/** What the service needs before it listens, read and checked (so a bad config or certificate is reported before anything listens). */
export interface PreparedRls {
  /** The settings it was prepared from. */
  readonly settings: GrpcSettings;
  /** The rate limit config; undefined when it did not load and `badConfigAtStart` is `serve` (see configError). */
  readonly config: RlsConfig | undefined;
  /** Why the config did not load, under `badConfigAtStart: serve`. */
  readonly configError?: Error | undefined;
  /** @internal the listener's TLS files; undefined for plaintext. */
  readonly tls: TlsFiles | undefined;
}

/** The service name of RLS v3, as health checks name it. */
const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';

/** How the listener is secured, for the listening line. */
function tlsMode(settings: GrpcSettings): 'none' | 'tls' | 'mtls' {
  return settings.tls === undefined ? 'none' : settings.tls.clientCa === undefined ? 'tls' : 'mtls';
}

/** A running rate limit service. Create with {@link RlsServer.start}; stop with {@link close}. */
export class RlsServer {
  private config: RlsConfig | undefined;
  private reloader: RlsReloader | undefined;
  private transport: Transport | undefined;
  private listening = '';
  private readonly deciding: DecideOptions;
  private readonly wire: Omit<WireOptions, 'dynamicMetadata'>;

  private constructor(
    config: RlsConfig | undefined,
    private readonly settings: GrpcSettings,
    private readonly gateway: Gateway,
    private readonly limiters: RlsLimiters,
    private readonly metrics: RlsMetrics,
    private readonly log: GatewayLogger,
  ) {
    this.config = config;
    this.deciding = {
      countRefused: settings.countRefused === true,
      quotaMode: settings.quotaMode === true,
      shadowMode: settings.shadowMode === true,
      recent: new RecentCounts(),
    };
    // Headers reach the client: off unless asked for, and named by position unless names are exposed.
    this.wire = { headers: settings.headers ?? 'none', exposeLimitNames: settings.exposeLimitNames === true };
  }

  /**
   * Loads the config and the TLS files (and @grpc/grpc-js under `grpc.server: grpc-js`): what `floodgate check`
   * checks, and what serve reads before anything listens. With `badConfigAtStart: serve` (and not `strict`, as
   * `floodgate check` asks), a config that does not load is kept as `configError` instead: the service then starts
   * without limits.
   * @throws ConfigError for a bad rate limit config or TLS file; MISSING_DEPENDENCY without @grpc/grpc-js under `grpc.server: grpc-js`
   */
  static async prepare(settings: GrpcSettings, strict = false): Promise<PreparedRls> {
    const tolerant = !strict && settings.badConfigAtStart === 'serve';
    const [loaded, tls] = await Promise.all([
      loadRlsConfig(settings.config).then(
        (config) => ({ config, error: undefined }),
        (error: unknown) => {
          // Only the config's own errors: a path that cannot be read at all (nothing to watch) still ends the start.
          if (!tolerant || !isFloodgateError(error) || (error.code === ErrorCode.CONFIG_UNREADABLE && !existsSync(settings.config)))
            throw error;
          return { config: undefined, error };
        },
      ),
      readTlsFiles(settings.tls),
      settings.server === 'grpc-js' ? loadGrpc() : undefined,
    ]);
    return { settings, config: loaded.config, configError: loaded.error, tls };
  }

  /**
   * Listens (after {@link prepare}, or preparing first when given settings).
   * @throws ConfigError for a bad rate limit config; MISSING_DEPENDENCY without @grpc/grpc-js under `grpc.server: grpc-js`; the bind error when the port is taken
   */
  static async start(from: GrpcSettings | PreparedRls, gateway: Gateway, prom: PromClient, log: GatewayLogger): Promise<RlsServer> {
    const { settings, config, configError, tls } = 'settings' in from ? from : await RlsServer.prepare(from);
    const limiters = new RlsLimiters(gateway.rlsTables, gateway.ruleContext, () => gateway.current);
    const metrics = new RlsMetrics(prom, gateway.metrics.registry);
    const rls = new RlsServer(config, settings, gateway, limiters, metrics, log);
    const { host, port } = settings.listen;
    const listen = settings.server === 'grpc-js' ? listenGrpcJs : listenHttp2;
    try {
      rls.transport = await listen({
        host,
        port,
        tls,
        maxMessageBytes: MAX_MESSAGE_BYTES,
        maxConnectionAgeMs: settings.maxConnectionAgeMs,
        maxConnectionAgeGraceMs: settings.maxConnectionAgeGraceMs,
        methods: new Map([
          [SHOULD_RATE_LIMIT_PATH, rls.shouldRateLimit],
          [HEALTH_CHECK_PATH, rls.check],
        ]),
      });
    } catch (error) {
      throw new Error(`--grpc ${hostPort(host, port)}: cannot listen: ${(error as Error).message}`, { cause: error });
    }
    rls.listening = hostPort(host, rls.transport.port);
    if (configError !== undefined)
      log.error(
        { path: settings.config, code: isFloodgateError(configError) ? configError.code : undefined, error: configError.message },
        'rate limit config failed to load; serving without limits (every call answered UNKNOWN) until a good config loads',
      );
    rls.reloader = new RlsReloader(settings.config, (next) => rls.setConfig(next), log, gateway.metrics);
    await rls.reloader.start();
    log.info(
      {
        grpc: rls.address,
        config: settings.config,
        domains: [...(config?.domains.keys() ?? [])],
        tls: tlsMode(settings),
        server: settings.server ?? 'http2',
      },
      'floodgate rls listening',
    );
    return rls;
  }

  /** Where it listens, `HOST:PORT` (the port chosen when 0 was asked for). */
  get address(): string {
    return this.listening;
  }

  /** Serves `config` from the next request on (limits whose numbers did not change keep their counters). */
  setConfig(config: RlsConfig): void {
    this.config = config;
    this.limiters.retain(config);
    this.metrics.retain(new Set(config.domains.keys()));
  }

  /** Reloads the config file(s) now, as SIGHUP does. */
  reload(): Promise<void> {
    return this.reloader?.reload('SIGHUP') ?? Promise.resolve();
  }

  /** Stops accepting calls, lets those in progress finish (at most `graceMs`), and stops watching the config. */
  close(graceMs = 5_000): Promise<void> {
    this.reloader?.stop();
    return this.transport?.close(graceMs) ?? Promise.resolve();
  }

  private readonly shouldRateLimit = (bytes: Buffer, reply: UnaryReply): void => {
    let request;
    try {
      request = decodeRateLimitRequest(bytes);
    } catch (error) {
      this.metrics.failed('invalid_request');
      // UNKNOWN, as envoyproxy/ratelimit answers a request it cannot decide: Envoy treats both alike, and so do compatibility checks.
      reply({ code: GrpcStatus.UNKNOWN, details: (error as Error).message });
      return;
    }
    const config = this.config;
    if (config === undefined) {
      // As envoyproxy/ratelimit answers before its first good config: an error, so Envoy's failure_mode_deny decides.
      this.metrics.failed('no_config');
      reply({ code: GrpcStatus.UNKNOWN, details: 'no rate limit configuration loaded' });
      return;
    }
    decideRls(config, this.limiters, request, undefined, this.deciding).then(
      (answer) => {
        let message: Buffer;
        try {
          message = encodeRateLimitResponse(writeResponse(answer, this.wireFor(request, answer.statuses)));
        } catch (error) {
          // A throw here would reject a promise nothing waits on: the call would never be answered (and Node would end).
          this.metrics.failed('error');
          this.logInternal(error);
          reply({ code: GrpcStatus.INTERNAL, details: 'internal error' });
          return;
        }
        this.metrics.answered(config.domains.has(request.domain) ? request.domain : '', answer.statuses, answer.overall);
        reply(null, message);
      },
      (error: unknown) => {
        if (error instanceof RlsRequestError) {
          this.metrics.failed('invalid_request');
          reply({ code: GrpcStatus.UNKNOWN, details: error.message });
        } else if (isStoreFailure(error)) {
          // The failure policy is reject: Envoy's own failure_mode_deny decides what the client gets.
          this.metrics.failed('store_error');
          reply({ code: GrpcStatus.UNAVAILABLE, details: `rate limit store unavailable: ${error.message}` });
        } else {
          this.metrics.failed('error');
          this.logInternal(error);
          reply({ code: GrpcStatus.INTERNAL, details: 'internal error' });
        }
      },
    );
  };

  /** How an answer is written: with its dynamic metadata when `grpc.dynamicMetadata` is on. */
  private wireFor(request: RlsRequestIn, statuses: Parameters<typeof dynamicMetadata>[1]): WireOptions {
    return this.settings.dynamicMetadata === true ? { ...this.wire, dynamicMetadata: dynamicMetadata(request, statuses) } : this.wire;
  }

  /** An error a request should never cause: logged with its stack, but at most once per interval, whatever the request rate. */
  private readonly logInternal = throttled<unknown>(ERROR_LOG_EVERY_MS, (error, suppressed) =>
    this.log.error({ err: error, suppressed }, 'internal error while deciding a rate limit request'),
  );

  private readonly check = (bytes: Buffer, reply: UnaryReply): void => {
    let service;
    try {
      service = decodeHealthCheckRequest(bytes);
    } catch (error) {
      reply({ code: GrpcStatus.INVALID_ARGUMENT, details: (error as Error).message });
      return;
    }
    if (service !== '' && service !== RLS_SERVICE) {
      reply({ code: GrpcStatus.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}` });
      return;
    }
    Promise.resolve(this.gateway.notReady()).then(
      (reason) => {
        // The service's own limiters' breakers count as the HTTP rules' do: only when the store counts for readiness.
        const failing = storeCountsForReadiness(this.gateway.current) && this.limiters.circuitOpen();
        reply(null, encodeHealthCheckResponse(reason === undefined && !failing ? 'SERVING' : 'NOT_SERVING'));
      },
      () => reply(null, encodeHealthCheckResponse('NOT_SERVING')),
    );
  };
}
