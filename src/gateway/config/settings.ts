/** The gateway's validated settings (from flags and the config file) and their defaults. */
import type { AdaptiveControllerOptions, Algorithm, CalendarSpec, PolicyOverride } from '../../index.js';
import type { HeaderMode, TrustProxy } from '../../http/index.js';
import type { ProxySettings } from './proxy-settings.js';
import type { LogLevel } from '../runtime/log.js';
import type { CompoundKeySettings, JwtSettings, ReadKeySettings } from './key-settings.js';

export { DEFAULT_PROXY, type ProxySettings } from './proxy-settings.js';
export type { JwtSettings, KeyPartSettings } from './key-settings.js';
// The levels belong to the logger below the config; the settings name them for the flags and the config file.
export { LOG_LEVELS, type LogLevel } from '../runtime/log.js';

/** A host and port to listen on. */
export interface ListenAddress {
  /** Host or address, e.g. `"127.0.0.1"`, `"0.0.0.0"`, `"::"`. */
  readonly host: string;
  /** Port; 0 picks a free one (printed in the `listening` log line). */
  readonly port: number;
}

/**
 * What an override value changes, policy by policy (in the rule's order;
 * undefined leaves that policy as the rule has it).
 */
export type ResolvedOverride = ReadonlyArray<PolicyOverride | undefined>;

/** The `plans` section: plan name → (policy name → the numbers it changes). */
export type PlanSettings = ReadonlyMap<string, ReadonlyMap<string, PolicyOverride>>;

/** A rule's `overrides`. */
export interface OverrideSettings {
  /** The entries of `keys`, pattern → what each policy's numbers become (in the rule's policy order). */
  readonly entries: ReadonlyMap<string, ResolvedOverride>;
  /** The entries of `keys` as written, for the admin API. */
  readonly raw: ReadonlyMap<string, unknown>;
  /** The Redis hash holding more entries (field: pattern, value: as in `keys`, JSON), shared by every host; undefined for none. */
  readonly redis: string | undefined;
}

/** One policy of a rule: a limit per window under one algorithm. */
export interface PolicySettings {
  /** Name in the RateLimit fields; default `"<limit>-per-<window>"`. */
  readonly name: string | undefined;
  /** Requests per window. */
  readonly limit: number;
  /** Window in ms; for a calendar window, the longest period (the windows follow `calendar`). */
  readonly windowMs: number;
  /** A calendar window (`window: month` with a `timeZone`): the period windows follow; undefined for a duration window. */
  readonly calendar?: CalendarSpec | undefined;
  /** The algorithm. */
  readonly algorithm: Algorithm;
  /** Block after going over the limit, in ms; 0 for none. */
  readonly blockMs: number;
  /** Token bucket only: the bucket size when not `limit` (`burst`). */
  readonly burst?: number | undefined;
  /** Token bucket only: a new key's tokens when not a full bucket (`initialTokens`). */
  readonly initialTokens?: number | undefined;
  /** Who this policy counts against when not the rule's key (the string forms only); undefined for the rule's key. */
  readonly key?: KeySettings | undefined;
}

/** Who a request counts against. */
export type KeySettings =
  /** The client address (after `trustProxy`). */
  | { readonly kind: 'ip' }
  /** One counter for every client (`global`): the rule's limit is the whole gateway's. */
  | { readonly kind: 'global' }
  /** A header; requests without it are answered 401 (or counted per IP when `fallbackToIp`). */
  | { readonly kind: 'header'; readonly header: string; readonly fallbackToIp: boolean; readonly validation?: KeyValidation }
  /** A cookie, a query parameter, the path or a part of it, the method, or a bearer token's claim (see key-settings.ts). */
  | ReadKeySettings
  /** Several sources at once (`header:x-api-key + path`), encoded so that no two tuples share a key. */
  | CompoundKeySettings;

/**
 * Checks an API key must pass before it is counted; a key that fails is
 * answered 401 without touching the store, so made-up keys cannot fill it.
 */
export interface KeyValidation {
  /** Longest key, in characters. */
  readonly maxLength: number | undefined;
  /** A regular expression the whole key must match. */
  readonly pattern: RegExp | undefined;
  /** The known keys (read from `allowList` at start and on every reload); undefined for any key. */
  readonly allowList: ReadonlySet<string> | undefined;
  /** The allow-list file, as resolved, for logs. */
  readonly allowListFile: string | undefined;
  /** The allow list kept in a Redis set on the gateway's store (`allowList: { redis: NAME }`); undefined for none. */
  readonly knownKeys?: KnownKeysSettings | undefined;
}

/** How a rule's allow list in Redis is read and cached (see docs/gateway.md "Known keys in Redis"). */
export interface KnownKeysSettings {
  /** The Redis set that lists the known keys (`redis`). */
  readonly set: string;
  /** How long a key found in the set is admitted without asking again, ms (`knownFor`). */
  readonly knownForMs: number;
  /** How long a key not found is refused without asking again, ms (`unknownFor`); 0 caches no refusal. */
  readonly unknownForMs: number;
  /** Most known keys cached, and separately most unknown keys cached (`cacheSize`). */
  readonly cacheSize: number;
  /** Most keys being looked up at once, waiting or sent (`maxLookups`); one more is answered 503. */
  readonly maxLookups: number;
}

/** Defaults of {@link KnownKeysSettings}'s cache. */
export const DEFAULT_KNOWN_KEYS: Omit<KnownKeysSettings, 'set'> = {
  knownForMs: 30_000,
  unknownForMs: 5_000,
  cacheSize: 10_000,
  maxLookups: 1_000,
};

/** Which requests a rule applies to; every given condition must hold. */
export interface MatchSettings {
  /** Upper-case methods; undefined for any. */
  readonly methods: readonly string[] | undefined;
  /** Path prefix. */
  readonly pathPrefix: string | undefined;
  /** Regular expression tested against the path (no query string). */
  readonly pathPattern: RegExp | undefined;
  /** Lower-case host names without port; a leading `*.` matches any subdomain. */
  readonly hosts: readonly string[] | undefined;
  /** Header name (lower case) → exact value, or `true` for "present". */
  readonly headers: ReadonlyArray<readonly [string, string | true]> | undefined;
}

/** One rule: a match, a key and the policies every matching request counts against. */
export interface RuleSettings {
  /** Unique name, used in metrics, logs and store keys. */
  readonly name: string;
  /** The match. */
  readonly match: MatchSettings;
  /** Who a request counts against. */
  readonly key: KeySettings;
  /** The policies; a request passes only when all admit it. */
  readonly policies: readonly PolicySettings[];
  /** Report what the rule would do (headers, metrics, logs) without refusing anything. */
  readonly shadow: boolean;
  /** When this enforced rule matches, the rules after it are not tried (by default every matching enforced rule applies). */
  readonly final: boolean;
  /** Each request costs the units its upstream response reports (`cost:` in the config); absent: one unit per request. */
  readonly cost?: CostSettings | undefined;
  /** Only responses with these statuses count (`count:`), decided before forwarding and charged when the status is known; absent: every request counts. */
  readonly count?: CountSettings | undefined;
  /** Share of a policy's limit past which an admitted request counts in `floodgate_near_limit_total` (`nearLimit:`); absent: 0.8. */
  readonly nearLimit?: number | undefined;
  /** The most requests of one key in flight at once (`concurrency:`); absent: no in-flight limit. */
  readonly concurrency?: ConcurrencySettings | undefined;
  /** A refused request waits for a slot (with `concurrency`) or a unit (`wait:`); absent: refused at once. */
  readonly wait?: WaitSettings | undefined;
  /** Per-key overrides of the rule's policies (`overrides`); absent: every key has the rule's policies. */
  readonly overrides?: OverrideSettings | undefined;
  /** The 1-based line where the rule starts in its config file, for messages; undefined for the command line's rule. */
  readonly line?: number | undefined;
}

/** Where a response reports its cost: a response header, or a field of the JSON body (or of a streamed response's last event). */
export type UsageSource =
  /** A response header holding a whole number, e.g. `x-usage-tokens`. */
  | { readonly kind: 'header'; readonly header: string }
  /** A dotted path into the JSON body, or into each `text/event-stream` event's JSON data (the last one seen wins). */
  | { readonly kind: 'json'; readonly path: readonly string[] };

/** A rule's `cost`: the units reserved before forwarding, and where the response says what it really cost. */
export interface CostSettings {
  /** Units reserved per request before it is forwarded; what is charged when the response is not expected to report a cost (a non-2xx, HEAD). */
  readonly estimate: number;
  /** Where the actual cost is read. */
  readonly source: UsageSource;
  /** Units charged when a response that should report its cost does not (`cost.missing`); default the smallest policy limit. */
  readonly missing: number;
  /** Bytes of the upstream's answer read (and discarded) after the client left, to learn its usage (`cost.drainBytes`). */
  readonly drainBytes: number;
  /** Buffered JSON requests with `"stream": true` are sent with `stream_options.include_usage: true` (`cost.requestUsage`). */
  readonly requestUsage: boolean;
}

/** A rule's `count`: the responses that count against its policies, by status or status class. */
export interface CountSettings {
  /** Statuses that count (100–599), ascending. */
  readonly statuses: readonly number[];
  /** Status classes that count, by their first digit (5 for `5xx`), ascending. */
  readonly classes: readonly number[];
}

/** A rule's `concurrency`: slots per key, held while the proxied response runs. */
export interface ConcurrencySettings {
  /** Most requests of one key in flight at once. */
  readonly limit: number;
  /** A slot's lifetime without renewal, ms; renewed every ttl/3 while held. */
  readonly ttlMs: number;
}

/** A rule's `wait`: how long a refused request may wait, and how many of one key may wait at once in a process. */
export interface WaitSettings {
  /** Longest wait, ms; then 429. */
  readonly timeoutMs: number;
  /** Most waiting requests of one key per gateway process; one more is refused at once. */
  readonly maxQueue: number;
}

/** What a limiter does while its store fails. */
export type FailurePolicy = 'insurance' | 'fail-open' | 'fail-closed' | 'reject';

/** Where the counters live. */
export interface StoreSettings {
  /** `memory` (embedded; the cluster store under `--workers`), `redis`, or `postgres`. */
  readonly kind: 'memory' | 'redis' | 'postgres';
  /**
   * Redis URL when `kind` is `redis` on one server (undefined on a Cluster or through Sentinel, see {@link connection}),
   * or the PostgreSQL connection URL when `kind` is `postgres`.
   */
  readonly url: string | undefined;
  /** `postgres` only: the table (`store.table`, default `floodgate_counters`) and whether it is UNLOGGED (`store.unlogged`). */
  readonly postgres?: { readonly table: string | undefined; readonly unlogged: boolean } | undefined;
  /**
   * How Redis is reached besides one plain URL: a Cluster's seed nodes, a
   * Sentinel set-up, or one server's ACL user, password and TLS files.
   * Undefined for the memory store and for a URL alone.
   */
  readonly connection?: RedisConnection | undefined;
  /** Spend quota locally and settle with Redis in the background (LocalFirstStore). */
  readonly localFirst: boolean;
  /** Under `--workers` on the memory store: ms of demand the cluster store leases to each worker (ClusterStore `leaseMs`); 0 for none. */
  readonly leaseMs: number;
  /** Store call timeout in ms. */
  readonly timeoutMs: number;
  /** What to do while the store fails. */
  readonly onFailure: FailurePolicy;
  /** Namespace of the gateway's keys in the store. */
  readonly prefix: string;
  /**
   * Memory store (and cluster store): most keys one rule holds. A full table
   * forgets no live key; new keys are decided in the overflow sketch.
   */
  readonly maxKeys: number;
  /** Cells of each policy's overflow sketch. */
  readonly overflowCells: number;
  /** The memory store's snapshots (`store.snapshotFile`); undefined: none, counts are lost with the process. */
  readonly snapshot?: SnapshotSettings | undefined;
}

/** Where and how often the embedded memory store's counts are written, to be restored at the next start. */
export interface SnapshotSettings {
  /** The file (resolved): read at start, written every {@link everyMs} and when the gateway stops. */
  readonly file: string;
  /** ms between two snapshots: what a crash (SIGKILL, power loss) may lose at most. */
  readonly everyMs: number;
  /** A file that exists but cannot be restored: `exit` (refuse to start, the default) or `start-empty` (log it, move it aside). */
  readonly onError: 'exit' | 'start-empty';
}

/** How the gateway reaches Redis: one server (`url`), a Redis Cluster, or a master found through Sentinel. */
export type RedisTopology = 'single' | 'cluster' | 'sentinel';

/** A Redis host and port (a Cluster seed node or a sentinel). */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/** PEM contents of the store's TLS files (read when the settings are), for every topology. */
export interface RedisTlsSettings {
  /** CA certificates the servers' certificates must be signed by; undefined: the system's CAs. */
  readonly ca: string | undefined;
  /** The client's certificate (mutual TLS); with `key`. */
  readonly cert: string | undefined;
  /** The client's private key; with `cert`. */
  readonly key: string | undefined;
}

/**
 * The store's Redis connection beyond a URL (the `store` section's
 * `cluster`, `sentinel`, `username`, `passwordFile`/`passwordEnv`, `tls`,
 * or the `--redis-*` flags). The secrets are held here and nowhere else:
 * the start-up log and the dashboard show descriptions without them.
 */
export interface RedisConnection {
  /** Which kind of set-up. */
  readonly topology: RedisTopology;
  /** A Cluster's seed nodes, or the sentinels; empty for one server (its address is in the URL). */
  readonly nodes: readonly RedisNode[];
  /** The master's name the sentinels know (`sentinel.name`); undefined unless `topology` is `sentinel`. */
  readonly masterName: string | undefined;
  /** ACL user of the Redis servers (`username`); undefined for the default user. */
  readonly username: string | undefined;
  /** Password of the Redis servers, read from `passwordFile` or `passwordEnv`; never logged. */
  readonly password: string | undefined;
  /** ACL user of the sentinels (`sentinel.username`). */
  readonly sentinelUsername: string | undefined;
  /** Password of the sentinels (`sentinel.passwordFile` or `sentinel.passwordEnv`); never logged. */
  readonly sentinelPassword: string | undefined;
  /** TLS to the servers (and to the sentinels); undefined: plain TCP unless the URL is `rediss://`. */
  readonly tls: RedisTlsSettings | undefined;
  /** How long start waits for a Cluster's seed nodes or the sentinels and their master to answer, ms (`connectTimeout`). */
  readonly connectTimeoutMs: number;
  /** Where the set-up was written, for errors at start: `store` (the config file's section) or the flag, e.g. `--redis-cluster`. */
  readonly field: string;
}

/** Default {@link RedisConnection.connectTimeoutMs}: ioredis's own connect timeout. */
export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 10_000;

/** What `/readyz` checks besides the drain. */
export interface ReadinessSettings {
  /** Also require a TCP connection to the upstream to succeed (probed at most once per second). */
  readonly upstream: boolean;
  /**
   * Require the store to be connected and its breakers closed. Undefined
   * follows `store.onFailure`: required only under `reject`, where a gateway
   * without its store refuses every limited request; under the other
   * policies the fallback decides, and readiness tied to a store that every
   * replica shares would take them all out of the load balancer at once.
   */
  readonly store?: boolean;
}

/** How request paths are canonicalised and matched (see rules/path-match.ts). */
export interface PathSettings {
  /** Match `path`/`pathPattern` case-sensitively; off by default, as Express and Koa route case-insensitively. */
  readonly caseSensitive: boolean;
  /** `%2F` and `%5C`: refuse with 400, decode to `/` (matched and forwarded so), or keep escaped (matched as data). */
  readonly escapedSlashes: 'reject' | 'decode' | 'keep';
  /** `;` in the path: refuse with 400, strip each segment's `;` parameters (as Tomcat/Spring do; forwarded stripped), or keep as data. */
  readonly semicolons: 'reject' | 'strip' | 'keep';
  /** `%25` before two hex digits (`%252F`): refuse with 400, or keep as an escaped `%`. */
  readonly doubleEncoding: 'reject' | 'keep';
}

/** The Envoy rate limit service (RLS v3 over gRPC): where it listens and the envoyproxy/ratelimit YAML it serves (see docs/rls.md). */
export interface GrpcSettings {
  /** The gRPC listener. */
  readonly listen: ListenAddress;
  /** One YAML file, or a directory whose every .yaml/.yml file is read (each with its own domain); resolved. */
  readonly config: string;
  /** TLS on the gRPC listener (`grpc.tls`, `--grpc-cert`/`--grpc-key`/`--grpc-client-ca`); undefined: plaintext. */
  readonly tls?: GrpcTlsSettings | undefined;
  /** `grpc.countRefused`: a refused request's hits are still counted (envoyproxy/ratelimit's default); default false, a refused request counts nothing. */
  readonly countRefused?: boolean | undefined;
  /** `grpc.headers`: the RateLimit header fields Envoy adds to the client's response; default `none` (independent of the HTTP `headers`). */
  readonly headers?: readonly HeaderMode[] | 'none' | undefined;
  /** `grpc.exposeLimitNames`: name the header fields' policies by limit name or place (`edge.user`) instead of by descriptor position (`d0`). */
  readonly exposeLimitNames?: boolean | undefined;
  /** `grpc.dynamicMetadata`: set the response's `dynamic_metadata` (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA); default false. */
  readonly dynamicMetadata?: boolean | undefined;
  /** `grpc.quotaMode`: every descriptor is a quota descriptor (envoyproxy/ratelimit's QUOTA_MODE); default false. */
  readonly quotaMode?: boolean | undefined;
  /** `grpc.shadowMode`: every answer's overall code is OK (envoyproxy/ratelimit's SHADOW_MODE); default false. */
  readonly shadowMode?: boolean | undefined;
  /** `grpc.badConfigAtStart`: `exit` (default) ends the start on a bad rate limit config; `serve` logs it and serves without limits until a good one loads. */
  readonly badConfigAtStart?: 'exit' | 'serve' | undefined;
  /** `grpc.server`: `http2` (default) frames the service's calls on node:http2; `grpc-js` serves them with @grpc/grpc-js. */
  readonly server?: 'http2' | 'grpc-js' | undefined;
  /**
   * `grpc.maxConnectionAge`: ms after which a connection is sent GOAWAY (±10 %), so clients reconnect and spread over
   * the processes behind a balancer (envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE); undefined: connections stay.
   */
  readonly maxConnectionAgeMs?: number | undefined;
  /** `grpc.maxConnectionAgeGrace`: ms the calls in flight get after that GOAWAY before the connection is closed (default 10 s). */
  readonly maxConnectionAgeGraceMs?: number | undefined;
}

/** The rate limit service's TLS: PEM files (resolved paths), read when it starts. */
export interface GrpcTlsSettings {
  /** The server's certificate chain. */
  readonly cert: string;
  /** The server's private key. */
  readonly key: string;
  /** CA certificates a client's certificate must be signed by (mutual TLS); undefined: clients present none. */
  readonly clientCa?: string | undefined;
}

/** Everything `floodgate serve` runs with. */
export interface GatewaySettings {
  /** The config file, when one was given (reloads read it again). */
  readonly configFile: string | undefined;
  /** Where requests are forwarded; undefined for a decision-only service. */
  readonly upstream: URL | undefined;
  /** The proxy listener. */
  readonly listen: ListenAddress;
  /** A separate listener for /metrics, /healthz, /readyz; undefined to serve them under /_floodgate/ only. */
  readonly admin: ListenAddress | undefined;
  /** The admin API's bearer token (`admin.token`, `admin.tokenFile`, `--admin-token-file`); undefined leaves the API off. */
  readonly adminToken?: string | undefined;
  /** `admin.hosts`: the Host names the admin listener answers for besides IP literals and `localhost`; undefined answers any. */
  readonly adminHosts?: readonly string[] | undefined;
  /** Worker processes; 0 runs in this process. */
  readonly workers: number;
  /** The store. */
  readonly store: StoreSettings;
  /** Proxies whose X-Forwarded-For to believe. */
  readonly trustProxy: TrustProxy;
  /**
   * True when `trustProxy` was written (in the file or as `--trust-proxy`),
   * `false` included: only an unset one warns of ignored forwarding headers.
   */
  readonly trustProxyGiven?: boolean;
  /** RateLimit header families. */
  readonly headers: readonly HeaderMode[] | 'none';
  /**
   * Spread of a refusal's `Retry-After`, ms: each refused client is told the
   * true wait plus a random share of this, in whole seconds, so clients
   * refused together do not all come back in the same second. 0 or absent:
   * none.
   */
  readonly retryAfterJitterMs?: number;
  /** Answer keys known to be over their limit from memory. */
  readonly inMemoryBlock: boolean;
  /** Proxy settings. */
  readonly proxy: ProxySettings;
  /** Path of the decision endpoint, or false to disable it. */
  readonly decisionPath: string | false;
  /** What readiness checks. */
  readonly readiness: ReadinessSettings;
  /** Longest wait for in-flight requests on SIGTERM, ms. */
  readonly drainTimeoutMs: number;
  /** pino level. */
  readonly logLevel: LogLevel;
  /** Watch the config file and reload it when it changes. */
  readonly watch: boolean;
  /** Path canonicalisation and matching. */
  readonly paths: PathSettings;
  /** The rules, in order. */
  readonly rules: readonly RuleSettings[];
  /** How bearer tokens are verified for `jwt:CLAIM` keys (`jwt:`); undefined when no key reads a token. */
  readonly jwt?: JwtSettings | undefined;
  /** The plans (`plans`) that rules' overrides name; empty for none. */
  readonly plans: PlanSettings;
  /** Telemetry besides Prometheus; absent means none. */
  readonly telemetry?: TelemetrySettings;
  /** The Envoy rate limit service (`grpc`, `--grpc`); undefined when off. */
  readonly grpc?: GrpcSettings | undefined;
  /** The upstream's in-flight limit with priority classes and tenant-fair waiting (`overload`); undefined when off. */
  readonly overload?: OverloadSettings | undefined;
}

/** One priority class: its name, and the requests it takes (undefined: every request no class above took). */
export interface PriorityClassSettings {
  readonly name: string;
  readonly match: MatchSettings | undefined;
}

/** The `overload` section, checked. */
export interface OverloadSettings {
  /** `adaptive`, or a fixed number of requests in flight to the upstream per process. */
  readonly limit: number | 'adaptive';
  /** The adaptive controller's options, as the library takes them; empty for its defaults. */
  readonly adaptive: AdaptiveControllerOptions;
  /** The classes, highest first; a request takes the first whose match fits, else the one without a match. */
  readonly priorities: readonly PriorityClassSettings[];
  /** Whose line a waiting request joins: ip, global or header:NAME. */
  readonly tenant: KeySettings;
  /** The most of the limit one tenant may hold in flight (above 0, at most 1; 1: no share). */
  readonly tenantShare: number;
  /** The wait for a slot, or false to refuse at once at the limit. */
  readonly queue: { readonly timeoutMs: number; readonly maxQueue: number } | false;
  /** Upstream statuses read as overload (the limit backs off); a failure to connect or a timeout always is. */
  readonly errorStatuses: readonly number[];
}

/** The `telemetry` section. */
export interface TelemetrySettings {
  /**
   * Record metrics and store-call spans through `@opentelemetry/api`'s
   * global MeterProvider and TracerProvider (the operator registers an SDK);
   * `/metrics` is unchanged. See docs/telemetry.md.
   */
  readonly otel: boolean;
}

/** Failure policies the config accepts. */
export const FAILURE_POLICIES: readonly FailurePolicy[] = ['insurance', 'fail-open', 'fail-closed', 'reject'];

/** Defaults of {@link PathSettings}: refuse what upstreams read in different ways, match as loosely as their routers. */
export const DEFAULT_PATHS: PathSettings = {
  caseSensitive: false,
  escapedSlashes: 'reject',
  semicolons: 'reject',
  doubleEncoding: 'reject',
};

/** Defaults of {@link ReadinessSettings}. */
export const DEFAULT_READINESS: ReadinessSettings = { upstream: false };

/** Defaults of {@link StoreSettings}. */
export const DEFAULT_STORE: StoreSettings = {
  kind: 'memory',
  url: undefined,
  localFirst: false,
  leaseMs: 0,
  timeoutMs: 500,
  onFailure: 'insurance',
  prefix: 'fg:gw',
  maxKeys: 100_000,
  overflowCells: 16_384,
};

/** Default proxy listener. */
export const DEFAULT_LISTEN: ListenAddress = { host: '127.0.0.1', port: 8080 };
/** Default decision endpoint path. */
export const DEFAULT_DECISION_PATH = '/_floodgate/decide';
/** Prefix of the gateway's own endpoints on the proxy listener. */
export const INTERNAL_PREFIX = '/_floodgate/';
