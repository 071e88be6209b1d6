/** A minimal Envoy RLS v3 client (ShouldRateLimit) over @grpc/grpc-js and @grpc/proto-loader, loaded lazily with an install hint. */
import { BenchError } from '../lib/errors.js';
import { PROTO_DIR, RLS_PROTO } from './paths.js';

/** One descriptor: its entries in order. */
export type Descriptor = readonly (readonly [key: string, value: string])[];

/** A ShouldRateLimit request. */
export interface RlsRequest {
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
  /** Hits this request counts for (0 or absent: 1). */
  readonly hitsAddend?: number;
}

/** The fields of a descriptor status the comparison looks at. */
export interface RlsStatus {
  readonly code: string;
  /** `"<requests_per_unit>/<UNIT>"` with the name when set, or null without a current limit. */
  readonly currentLimit: string | null;
  readonly limitRemaining: number;
  /** Seconds until the window resets; time-dependent, so shown but not compared. */
  readonly resetS: number | null;
}

/** A ShouldRateLimit answer, or the gRPC error it failed with. */
export type RlsAnswer =
  | { readonly kind: 'response'; readonly overallCode: string; readonly statuses: readonly RlsStatus[] }
  | { readonly kind: 'error'; readonly grpcCode: string; readonly message: string };

/** A connected client; close it when done. */
export interface RlsClient {
  /** Resolves once the channel is connected, so the first timed call does not pay for the handshake. */
  ready(): Promise<void>;
  shouldRateLimit(request: RlsRequest): Promise<RlsAnswer>;
  close(): void;
}

type GrpcJs = typeof import('@grpc/grpc-js');
type ProtoLoader = typeof import('@grpc/proto-loader');

async function loadGrpc(): Promise<{ grpc: GrpcJs; loader: ProtoLoader }> {
  try {
    const [grpc, loader] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader')]);
    return { grpc, loader };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new BenchError(
        'the rls scripts need @grpc/grpc-js and @grpc/proto-loader: npm install --save-dev @grpc/grpc-js @grpc/proto-loader',
      );
    }
    throw error;
  }
}

interface WireStatus {
  code?: string;
  current_limit?: { name?: string; requests_per_unit?: number; unit?: string } | null;
  limit_remaining?: number;
  duration_until_reset?: { seconds?: string; nanos?: number } | null;
}
interface WireResponse {
  overall_code?: string;
  statuses?: WireStatus[];
}
type Callback = (error: (Error & { code?: number; details?: string }) | null, response?: WireResponse) => void;
interface WireClient {
  ShouldRateLimit(request: unknown, options: { deadline: number }, callback: Callback): void;
  waitForReady(deadline: number, callback: (error?: Error) => void): void;
  close(): void;
}

function toStatus(s: WireStatus): RlsStatus {
  const limit = s.current_limit;
  const seconds = s.duration_until_reset ? Number(s.duration_until_reset.seconds ?? 0) + (s.duration_until_reset.nanos ?? 0) / 1e9 : null;
  return {
    code: s.code ?? 'UNKNOWN',
    currentLimit: limit ? `${limit.requests_per_unit ?? 0}/${limit.unit ?? 'UNKNOWN'}${limit.name ? ` (${limit.name})` : ''}` : null,
    limitRemaining: s.limit_remaining ?? 0,
    resetS: seconds,
  };
}

/** Connects to an RLS v3 server on 127.0.0.1:`port` (plaintext). */
export async function connectRls(port: number): Promise<RlsClient> {
  const { grpc, loader } = await loadGrpc();
  // defaults + enums as strings: absent fields read as their proto3 zero value, codes by name.
  const definition = loader.loadSync(RLS_PROTO, { keepCase: true, enums: String, longs: String, defaults: true, includeDirs: [PROTO_DIR] });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: new (address: string, credentials: unknown) => WireClient } } } };
  };
  const Service = pkg.envoy.service.ratelimit.v3.RateLimitService;
  const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const names = Object.fromEntries(Object.entries(grpc.status).map(([name, value]) => [value, name])) as Record<number, string>;
  return {
    ready: () => new Promise((resolve, reject) => client.waitForReady(Date.now() + 5000, (error) => (error ? reject(error) : resolve()))),
    shouldRateLimit(request) {
      const wire = {
        domain: request.domain,
        descriptors: request.descriptors.map((entries) => ({ entries: entries.map(([key, value]) => ({ key, value })) })),
        hits_addend: request.hitsAddend ?? 0,
      };
      return new Promise((resolve) => {
        client.ShouldRateLimit(wire, { deadline: Date.now() + 5000 }, (error, response) => {
          if (error) {
            resolve({ kind: 'error', grpcCode: names[error.code ?? 2] ?? String(error.code), message: error.details ?? error.message });
          } else {
            resolve({
              kind: 'response',
              overallCode: response?.overall_code ?? 'UNKNOWN',
              statuses: (response?.statuses ?? []).map(toStatus),
            });
          }
        });
      });
    },
    close: () => client.close(),
  };
}
