/** The gateway's `proxy` settings: upstream connections and timeouts, and what protects the listener from its clients, with their defaults. */

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
  /** Headers (lower case) removed from requests of peers that are not trusted proxies; false keeps them all. */
  readonly stripHeaders: readonly string[] | false;
}

/**
 * Headers that claim a client identity, a scheme or a different target and
 * that only a proxy in front may set; removed from an untrusted peer's
 * request by default (see {@link ProxySettings.stripHeaders}).
 */
export const DEFAULT_STRIP_HEADERS: readonly string[] = [
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
  upgrades: ['websocket'],
  requestBuffer: 65_536,
  minBodyRate: 1_024,
  clientWriteTimeoutMs: 60_000,
  queueTimeoutMs: 10_000,
  stripHeaders: DEFAULT_STRIP_HEADERS,
};
