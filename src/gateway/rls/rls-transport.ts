/** What a gRPC transport of the rate limit service serves: two unary methods on raw bytes, and gRPC's status codes. */
/**
 * The service decides on bytes in and bytes out (rls-codec.ts); a transport only frames them: the lean node:http2
 * one (rls-http2.ts, the default) or @grpc/grpc-js (rls-grpcjs.ts, `grpc.server: grpc-js`).
 */

/** gRPC status codes the service answers with (the numbers of grpc's `Code`, as every gRPC library has them). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** A call that ends with a status other than OK. */
export interface GrpcFailure {
  /** Its gRPC status code (see {@link GrpcStatus}). */
  readonly code: number;
  /** Its message (grpc-message). */
  readonly details: string;
}

/** Ends a unary call: with a failure, or with the encoded response message. */
export type UnaryReply = (failure: GrpcFailure | null, message?: Buffer) => void;

/** A unary method: its request's encoded message, and where its answer goes (called once). */
export type UnaryMethod = (request: Buffer, reply: UnaryReply) => void;

/** The full path of ShouldRateLimit. */
export const SHOULD_RATE_LIMIT_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
/** The full path of the gRPC health protocol's Check. */
export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';

/** `HOST:PORT`, with brackets around an IPv6 host: how grpc-js binds and how the service says where it listens. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The methods a transport serves, by full path; any other path is answered UNIMPLEMENTED. */
type UnaryMethods = ReadonlyMap<string, UnaryMethod>;

/** The listener's TLS material, read and checked (rls-tls.ts). */
export interface TlsFiles {
  /** The server's certificate chain (PEM). */
  readonly cert: Buffer;
  /** Its private key (PEM). */
  readonly key: Buffer;
  /** CA certificates a client's certificate must be signed by; undefined: no client certificate is asked for. */
  readonly ca?: Buffer | undefined;
}

/** What a transport is started with. */
export interface TransportOptions {
  /** Where to listen. */
  readonly host: string;
  /** The port (0: any free one). */
  readonly port: number;
  /** TLS, or undefined for plaintext (h2c). */
  readonly tls: TlsFiles | undefined;
  /** The largest request message read, in bytes; a larger one is answered RESOURCE_EXHAUSTED without being read. */
  readonly maxMessageBytes: number;
  /** The methods. */
  readonly methods: UnaryMethods;
  /** How long a call without `grpc-timeout` may take to send its request (default 10 s); then it is cancelled. */
  readonly requestReadMs?: number | undefined;
  /** A connection's age (±10 %) at which it is sent GOAWAY, so clients reconnect elsewhere; undefined: no limit. */
  readonly maxConnectionAgeMs?: number | undefined;
  /** What the calls in flight get after that GOAWAY before the connection is closed. */
  readonly maxConnectionAgeGraceMs?: number | undefined;
}

/** A listening transport. */
export interface Transport {
  /** The port it listens on. */
  readonly port: number;
  /** Stops accepting calls and lets those in progress end, for at most `graceMs`; then closes what is left. */
  close(graceMs: number): Promise<void>;
}
