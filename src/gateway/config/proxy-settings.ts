/** The gateway's `proxy` settings. */
/**
 * Upstream connections and timeouts, and what protects the listener from its clients, with their defaults.
 */

/** Upstream connection and client-side protection settings. */
export interface ProxySettings {
  /** Connect timeout to the upstream, ms. */
  readonly connectTimeoutMs: number;
  /** Wait for the upstream's response headers, ms (then 504). */
  readonly headersTimeoutMs: number;
  /** Longest pause between upstream body chunks, ms. */
  readonly bodyTimeoutMs: number;
  /** Idle upstream keep-alive connections are closed after this, ms. */
  readonly idleTimeoutMs: number;
  /** Most upstream connections. */
  readonly connections: number;
  /** Largest request header block a client may send, bytes (then 431). */
  readonly maxHeaderSize: number;
  /** A client must send its headers within this, ms (slowloris cap). */
  readonly clientHeadersTimeoutMs: number;
  /** A client must send its whole request within this, ms; 0 for no limit. */
  readonly clientRequestTimeoutMs: number;
  /** Idle client keep-alive connections are closed after this, ms. */
  readonly clientKeepAliveTimeoutMs: number;
  /** Most client connections open at once on the proxy listener (per process); further ones are closed at accept. */
  readonly maxConnections: number;
  /**
   * Sockets the proxy port listens on in one process, bound with SO_REUSEPORT
   * (Node.js 22.12+ on Linux): each accepts one new connection per event-loop
   * iteration, so several take a storm of new connections in sooner. `auto`:
   * 4 where the runtime allows it and not under `--workers`, else 1.
   */
  readonly listenSockets: number | 'auto';
  /** Upgrade protocols (lower case) tunnelled after the decision; others are refused. Empty: no tunnels. */
  readonly upgrades: readonly string[];
  /** Request bodies up to this many bytes are read whole from the client before an upstream connection is taken; 0 streams every body. */
  readonly requestBuffer: number;
  /** A body too large to buffer must arrive at this many bytes per second on average (after a grace period), or it is cut with 408; 0 for no floor. */
  readonly minBodyRate: number;
  /** Longest wait for a free upstream connection once all `connections` are busy, ms, then 503; 0 waits as long as it takes. */
  readonly queueTimeoutMs: number;
  /** A response the client stops reading is cut after this many ms without progress, freeing its upstream connection; 0 for no limit. */
  readonly clientWriteTimeoutMs: number;
  /**
   * While a response waits on its client (bytes the client has not taken are
   * queued), the client must read at least this many bytes per second,
   * measured over windows of 5 s, or the response is cut; 0 for no floor.
   * An idle timer alone lets a client that reads a little now and then hold
   * an upstream connection for ever.
   */
  readonly minResponseRate: number;
  /** A response still waiting on its client this many ms after its head was written is cut; 0 for no limit. */
  readonly responseTimeoutMs: number;
  /**
   * Most bytes of request bodies held in memory at once by this process
   * (each body up to `requestBuffer`); a body that does not fit streams
   * instead. 0 buffers nothing (every body streams).
   */
  readonly requestBufferTotal: number;
  /** Headers (lower case) removed from requests of peers that are not trusted proxies; false keeps them all. */
  readonly stripHeaders: readonly string[] | false;
}

/**
 * Headers that claim a client identity, a scheme or a different target and
 * that only a proxy in front may set; removed from an untrusted peer's
 * request by default (see {@link ProxySettings.stripHeaders}).
 */
const DEFAULT_STRIP_HEADERS: readonly string[] = [
  'forwarded',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'fastly-client-ip',
  'x-cluster-client-ip',
  'x-original-forwarded-for',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-forwarded-scheme',
  'x-url-scheme',
  'x-host',
  'x-original-host',
  'x-original-url',
  'x-original-uri',
  'x-original-method',
  'x-rewrite-url',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
];

/** Defaults of {@link ProxySettings}. */
export const DEFAULT_PROXY: ProxySettings = {
  connectTimeoutMs: 5_000,
  headersTimeoutMs: 30_000,
  bodyTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  connections: 128,
  maxHeaderSize: 16_384,
  clientHeadersTimeoutMs: 10_000,
  clientRequestTimeoutMs: 60_000,
  clientKeepAliveTimeoutMs: 5_000,
  maxConnections: 10_000,
  listenSockets: 'auto',
  upgrades: ['websocket'],
  requestBuffer: 65_536,
  minBodyRate: 1_024,
  clientWriteTimeoutMs: 60_000,
  minResponseRate: 1_024,
  responseTimeoutMs: 600_000,
  requestBufferTotal: 64 * 1_048_576,
  queueTimeoutMs: 10_000,
  stripHeaders: DEFAULT_STRIP_HEADERS,
};
