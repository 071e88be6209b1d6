/** The Gateway: the proxy listener and the optional admin listener, live config changes, the graceful drain. */
/**
 * The proxy listener's request path is request-path.ts; config changes are applied live.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { MemoryStore } from '../../index.js';
import { adminListener, registryMetrics, type AdminSource } from '../admin/admin.js';
import { AdminApi, type AdminApiSource } from '../admin/admin-api.js';
import { LimitedKeys } from '../admin/limited-keys.js';
import type { AdminBroadcast } from '../admin/admin-broadcast.js';
import { adminSource } from '../admin/admin-source.js';
import { dashboardFor, statsOf } from '../admin/dashboard.js';
import type { DashboardStats } from '../admin/dashboard-stats.js';
import { askPrimaryForMetrics } from '../runtime/cluster-metrics.js';
import { ConnectionDrain } from './drain.js';
import { ListenSockets, listenSocketCount } from './listen-sockets.js';
import type { PinoModule, PromClient, Undici } from '../runtime/optional-deps.js';
import type { GatewayLogger } from '../runtime/log.js';
import { adminLimits, applyClientLimits, closeServer, createAdminServer, createProxyServer, listen, urlOf } from './listeners.js';
import { liveSettings } from './live-settings.js';
import { GatewayMetrics } from '../runtime/metrics.js';
import { UpstreamProxy } from './proxy.js';
import { OverloadGate } from '../rules/overload-gate.js';
import { registerOverloadMetrics } from '../runtime/overload-metrics.js';
import { handleUpgrade } from './upgrade.js';
import type { RuleContext, RuleSet } from '../rules/rule-set.js';
import { compileRules } from '../rules/compile-rules.js';
import { ForwardedHeaderWatch } from '../rules/forwarded-warning.js';
import type { GatewaySettings } from '../config/settings.js';
import { SharedResult } from '../runtime/shared-result.js';
import type { GatewayStore } from '../rules/key-tables.js';
import { openCounting, storeFailureLog } from '../store/gateway-store.js';
import { hopCountWarning } from '../config/trust-warning.js';
import { upstreamCheckFor, type UpstreamCheck } from './upstream-check.js';
import { RequestPath } from './request-path.js';
import { storeNotReady } from '../store/store-readiness.js';

/** The packages a gateway runs on, loaded by the caller (see runtime/optional-deps.ts). */
export interface GatewayDeps {
  /** undici. */
  readonly undici: Undici;
  /** prom-client. */
  readonly prom: PromClient;
  /** pino. */
  readonly pino: PinoModule;
}

/** Options of {@link Gateway.start}. */
export interface GatewayStartOptions {
  /** True in a `--workers` worker: counters go to the primary's cluster store, and the admin listener is the primary's. */
  readonly clustered?: boolean;
  /** Runs after the rules are compiled and before the listeners listen (a `--workers` worker takes its siblings' admin state). */
  readonly beforeListen?: (gateway: Gateway) => Promise<void>;
}

/** Under `--workers` with the admin API on: what a worker answers the primary's admin API with (see workers/worker-admin.ts). */
export interface WorkerAdmin {
  /** The rules, limiters, limited keys and overrides of this worker. */
  readonly source: AdminApiSource;
  /** This worker's dashboard numbers; the primary sums them as it sums metrics. */
  stats(): Promise<DashboardStats>;
}

/**
 * A running gateway. Create with {@link Gateway.start}; change with
 * {@link apply}; stop with {@link shutdown}.
 */
export class Gateway implements AdminSource {
  /** The proxy listener. */
  readonly server: Server;
  /** The admin listener, when `admin` is set. */
  readonly adminServer: Server | undefined;
  /** Metrics of this process. */
  readonly metrics: GatewayMetrics;
  /** In a `--workers` worker with the admin API on: what the primary's admin API asks of it; undefined otherwise. */
  readonly workerAdmin: WorkerAdmin | undefined;
  private settings: GatewaySettings;
  private rules: RuleSet;
  private proxy: UpstreamProxy | undefined;
  private draining = false;
  /** Answers the proxy listener's requests. */
  private readonly requests: RequestPath;
  private readonly connections: ConnectionDrain;
  /** The proxy port's listening sockets (see ListenSockets). */
  readonly sockets: ListenSockets;
  /** Concurrent scrapes share one rendering (under `--workers`, one question to the primary). */
  private readonly metricsRender: SharedResult<{ contentType: string; body: string }>;
  private upstreamCheck: UpstreamCheck | undefined;
  /** What limiters compiled beside the rules need (the store per rule, failure handling, metrics); the rate limit service builds its own on it. */
  readonly ruleContext: RuleContext;
  /** Announces and hears admin resets and unblocks on Redis; undefined without Redis or without the admin API. */
  private broadcast: AdminBroadcast | undefined;
  /** Refusals per rule and key for the admin API; only kept while it is on. */
  private readonly limited: LimitedKeys | undefined;
  /** Upgraded (WebSocket) connections: no longer HTTP, so closeAllConnections does not see them. */
  private readonly tunnels = new Set<Duplex>();

  private constructor(
    settings: GatewaySettings,
    private readonly deps: GatewayDeps,
    private readonly log: GatewayLogger,
    metrics: GatewayMetrics,
    private readonly store: GatewayStore,
    private readonly clustered: boolean,
  ) {
    this.settings = settings;
    this.metrics = metrics;
    this.requests = new RequestPath(
      { settings: () => this.settings, rules: () => this.rules, proxy: () => this.proxy, draining: () => this.draining },
      this,
      log,
    );
    metrics.inFlight = () => this.requests.inFlight;
    if (store.overflows !== undefined) metrics.overflows = store.overflows;
    registerOverloadMetrics(deps.prom, metrics, () => this.proxy?.gate?.limiter);
    // Keys come from clients here too: a full table must not forget the live ones.
    const insuranceStore = new MemoryStore({
      maxKeys: settings.store.maxKeys,
      onFull: 'overflow',
      overflowCells: settings.store.overflowCells,
    });
    this.limited = settings.adminToken === undefined ? undefined : new LimitedKeys();
    const limited = this.limited;
    this.ruleContext = {
      ...(limited === undefined ? {} : { onLimited: (rule: string, policy: string, key: string) => limited.note(rule, policy, key) }),
      storeFor: (rule) => store.storeFor(rule),
      storeCanFail: settings.store.kind !== 'memory' || clustered,
      insuranceStore,
      redis: store.redis,
      knownKeyChanges: store.knownKeyChanges,
      overrideSync: store.overrideSync,
      reportStoreFailure: storeFailureLog(log),
      log,
      metrics,
      forwarded: new ForwardedHeaderWatch(log),
    };
    this.rules = compileRules(settings, this.ruleContext);
    this.proxy = this.makeProxy(settings);
    this.upstreamCheck = upstreamCheckFor(settings);
    // Only the one in flight is shared: under --workers the primary reuses its aggregate for a second already, and
    // in one process a render is local and quick, and a scrape right after a request must see it.
    this.metricsRender = new SharedResult(
      clustered
        ? async () => ({ contentType: metrics.registry.contentType, body: await askPrimaryForMetrics() })
        : registryMetrics(metrics.registry),
      0,
    );
    this.server = createProxyServer(settings.proxy, this.requests.onRequest);
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      handleUpgrade(
        {
          settings: this.settings,
          proxy: this.proxy,
          draining: this.draining,
          rules: this.rules,
          tunnels: this.tunnels,
        },
        req,
        socket,
        head,
      ),
    );
    this.connections = new ConnectionDrain(this.server);
    this.sockets = new ListenSockets(
      this.server,
      listenSocketCount(settings.proxy.listenSockets, clustered, (message) =>
        log.warn({ listenSockets: settings.proxy.listenSockets }, message),
      ),
      settings.proxy.maxConnections,
    );
    // Under --workers the admin listener is the primary's; a worker with the API on answers the primary's calls instead.
    const admin = settings.admin === undefined || (clustered && settings.adminToken === undefined) ? undefined : this.openAdmin();
    this.workerAdmin = admin === undefined || !clustered ? undefined : { source: admin, stats: statsOf(metrics.registry, admin, store) };
    this.adminServer =
      admin === undefined || clustered
        ? undefined
        : createAdminServer(
            settings.proxy,
            adminListener(
              this,
              AdminApi.local(settings.adminToken, admin),
              dashboardFor(settings.adminToken, metrics.registry, admin, store),
              settings.adminHosts,
            ),
          );
  }

  /**
   * Opens the store, compiles the rules, and listens. Resolves once both
   * listeners are up.
   * @throws FloodgateError when the store cannot be opened or a rule is invalid; the listen error when the port is taken
   */
  static async start(
    settings: GatewaySettings,
    deps: GatewayDeps,
    log: GatewayLogger,
    options: GatewayStartOptions = {},
  ): Promise<Gateway> {
    const clustered = options.clustered ?? false;
    const { metrics, store, stopOtel } = await openCounting(settings, deps, log, clustered);
    let gateway: Gateway;
    try {
      gateway = new Gateway(settings, deps, log, metrics, store, clustered);
    } catch (error) {
      stopOtel?.();
      await store.close();
      throw error;
    }
    // A stopped gateway's numbers leave the global meter with it.
    if (stopOtel !== undefined) gateway.server.once('close', stopOtel);
    try {
      await options.beforeListen?.(gateway);
      await gateway.sockets.listen(settings.listen, '--listen, or listen in the config file');
      if (gateway.adminServer) await listen(gateway.adminServer, settings.admin!, '--admin, or admin in the config file');
    } catch (error) {
      // Nothing of a gateway that never served may linger: the other listener, the upstream pool, the store.
      gateway.sockets.close();
      gateway.server.close();
      gateway.adminServer?.close();
      await gateway.proxy?.close().catch(() => undefined);
      await store.close().catch(() => undefined);
      throw error;
    }
    log.info(
      {
        url: gateway.url,
        admin: gateway.adminUrl,
        upstream: settings.upstream?.href,
        store: store.description,
        rules: settings.rules.map((r) => r.name),
      },
      'floodgate gateway listening',
    );
    // Under --workers the primary warns, once for all workers.
    const trustWarning = clustered ? undefined : hopCountWarning(settings.trustProxy, settings.listen);
    if (trustWarning !== undefined) log.warn({ trustProxy: settings.trustProxy, listen: settings.listen }, trustWarning);
    return gateway;
  }

  /** `http://host:port` of the proxy listener. */
  get url(): string {
    return urlOf(this.server);
  }

  /** `http://host:port` of the admin listener, when there is one. */
  get adminUrl(): string | undefined {
    return this.adminServer === undefined ? undefined : urlOf(this.adminServer);
  }

  /**
   * The rate limit service's tables: on the embedded memory store one per
   * domain, apart from the rules' (which a gateway reload drops with their
   * rules), so a flood in one domain fills no other's table.
   */
  get rlsTables(): Pick<GatewayStore, 'rlsStoreFor' | 'retainRls'> {
    return this.store;
  }

  /** The settings in force. */
  get current(): GatewaySettings {
    return this.settings;
  }

  /** Renders the metrics in the Prometheus text format: this process's, or under `--workers` every worker's (from the primary). */
  renderMetrics(): Promise<{ contentType: string; body: string }> {
    return this.metricsRender.get();
  }

  /**
   * Why the gateway should not get traffic now (draining; the store not yet
   * tried, or, where it counts, down or not answering: see store-readiness.ts;
   * with `readiness.upstream` the upstream refusing connections), or
   * undefined when ready.
   */
  notReady(): string | undefined | Promise<string | undefined> {
    if (this.draining) return 'draining';
    const store = storeNotReady(this.settings, this.store, () => this.rules.storeCircuitOpen());
    if (store !== undefined) return store;
    return this.upstreamCheck?.notReady();
  }

  /**
   * Applies new settings: the rules, headers, trust and the upstream change
   * at once (counters are kept for policies that did not change). Settings
   * that need new listeners or a new store are reported and kept as they are.
   * @throws FloodgateError when the new rules are invalid; nothing changes then
   */
  apply(next: GatewaySettings): void {
    const prev = this.settings;
    const { kept, effective } = liveSettings(prev, next);
    const rules = compileRules(effective, this.ruleContext);
    // The gate's limit is learnt: a reload that changes other proxy settings keeps it (and the slots its requests hold);
    // one that changes the overload section, or how its classes and tenants are read, starts it afresh.
    const gateChanged =
      JSON.stringify(prev.overload, withPatterns) !== JSON.stringify(effective.overload, withPatterns) ||
      JSON.stringify(prev.trustProxy) !== JSON.stringify(effective.trustProxy) ||
      prev.paths.caseSensitive !== effective.paths.caseSensitive;
    const proxyChanged =
      gateChanged || prev.upstream?.href !== effective.upstream?.href || JSON.stringify(prev.proxy) !== JSON.stringify(effective.proxy);
    const proxy = proxyChanged ? this.makeProxy(effective, gateChanged ? undefined : this.proxy?.gate) : this.proxy;
    const old = this.proxy;
    this.rules = rules;
    const names = effective.rules.map((r) => r.name);
    this.store.retain?.(names);
    this.store.overrideSync?.retain(new Set(effective.rules.filter((r) => r.overrides?.redis !== undefined).map((r) => r.name)));
    this.limited?.retain(names);
    this.proxy = proxy;
    this.settings = effective;
    // Requests already decided on the old proxy keep it until they are forwarded; it closes after them.
    if (proxyChanged && old !== undefined) old.retire().catch(() => undefined);
    if (prev.upstream?.href !== effective.upstream?.href || prev.readiness.upstream !== effective.readiness.upstream)
      this.upstreamCheck = upstreamCheckFor(effective);
    applyClientLimits(this.server, effective.proxy);
    this.sockets.setMaxConnections(effective.proxy.maxConnections);
    if (this.adminServer) applyClientLimits(this.adminServer, adminLimits(effective.proxy));
    this.log.level = effective.logLevel;
    const trustWarning =
      JSON.stringify(prev.trustProxy) === JSON.stringify(effective.trustProxy) || this.clustered
        ? undefined
        : hopCountWarning(effective.trustProxy, effective.listen);
    if (trustWarning !== undefined) this.log.warn({ trustProxy: effective.trustProxy, listen: effective.listen }, trustWarning);
    if (kept.length > 0)
      this.log.warn({ settings: kept }, 'these settings changed in the config file but need a restart; the running values are kept');
    this.log.info({ rules: effective.rules.map((r) => r.name), upstream: effective.upstream?.href }, 'config applied');
  }

  /**
   * Graceful stop: readiness turns false and the listeners stop accepting.
   * Every request that reaches a proxy connection from then on is answered,
   * with `Connection: close`, and the connection closes after it; idle
   * keep-alive connections close when their keep-alive timeout lapses (never
   * earlier: the client may be writing its next request). Then the upstream
   * pool and the store close. Connections still open after `drainTimeout`
   * are cut.
   */
  async shutdown(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.log.info({ inFlight: this.requests.inFlight, connections: this.connections.size }, 'draining');
    const adminClosed = this.adminServer ? closeServer(this.adminServer) : Promise.resolve();
    this.sockets.close();
    const left = await this.connections.drain(this.settings.drainTimeoutMs);
    if (left > 0)
      this.log.warn({ inFlight: this.requests.inFlight, connections: left }, 'drain timeout: cutting the remaining connections');
    const closed = closeServer(this.server);
    this.server.closeAllConnections();
    this.adminServer?.closeAllConnections();
    // Long-lived tunnels have no request boundary to wait for; their clients reconnect to another instance.
    for (const socket of this.tunnels) socket.destroy();
    await Promise.all([closed, adminClosed]);
    await this.proxy?.close().catch(() => undefined);
    this.broadcast?.close();
    await this.store.close().catch(() => undefined);
    this.log.info('stopped');
  }

  private openAdmin(): AdminApiSource {
    const { source, broadcast } = adminSource({
      rules: () => this.rules,
      settings: () => this.settings,
      limited: this.limited,
      pubsub: this.store.pubsub,
      overrideSync: this.store.overrideSync,
    });
    this.broadcast = broadcast;
    return source;
  }

  /** A proxy to the settings' upstream; with `gate`, the overload gate it keeps from the proxy it replaces. */
  private makeProxy(settings: GatewaySettings, gate?: OverloadGate): UpstreamProxy | undefined {
    if (settings.upstream === undefined) return undefined;
    return new UpstreamProxy(
      this.deps.undici,
      settings.upstream,
      settings.proxy,
      settings.trustProxy,
      this.metrics,
      this.log,
      () => this.draining,
      gate ??
        (settings.overload === undefined
          ? undefined
          : new OverloadGate(settings.overload, settings.trustProxy, settings.paths.caseSensitive)),
    );
  }
}

/** JSON.stringify's replacer for settings that hold regular expressions (a class's pathPattern): each by its source and flags. */
function withPatterns(_key: string, value: unknown): unknown {
  return value instanceof RegExp ? value.toString() : value;
}
