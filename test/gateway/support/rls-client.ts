// A real @grpc/grpc-js client of the rate limit service, on the same .proto files the server loads, for the RLS tests.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const PROTO_DIR = fileURLToPath(new URL('../../../proto', import.meta.url));
const OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] };

/** One descriptor as the client sends it. */
export interface Descriptor {
  entries: Array<{ key: string; value?: string }>;
  limit?: { requests_per_unit: number; unit: string };
  hits_addend?: { value: number };
}

/** A RateLimitResponse as the client reads it. */
export interface RlsResponse {
  overall_code: string;
  statuses: Array<{
    code: string;
    current_limit: { name: string; requests_per_unit: number; unit: string } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
  }>;
  response_headers_to_add: Array<{ key: string; value: string }>;
  request_headers_to_add: Array<{ key: string; value: string }>;
  /** google.protobuf.Struct as the client decodes it (each value with its `kind`); null when not set. */
  dynamic_metadata: StructMessage | null;
}

/** A decoded google.protobuf.Struct. */
export interface StructMessage {
  fields: Record<string, StructValue>;
}

/** A decoded google.protobuf.Value (protobufjs defines the well-known types in camel case, whatever keepCase says). */
export interface StructValue {
  kind: 'nullValue' | 'numberValue' | 'stringValue' | 'boolValue' | 'structValue' | 'listValue';
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMessage;
  listValue?: { values: StructValue[] };
}

/** A decoded Struct as plain JSON, to compare with what the config says. */
export function structToJson(s: StructMessage | null): unknown {
  if (s === null) return null;
  const value = (v: StructValue): unknown => {
    switch (v.kind) {
      case 'nullValue':
        return null;
      case 'structValue':
        return structToJson(v.structValue!);
      case 'listValue':
        return v.listValue!.values.map(value);
      default:
        return v[v.kind];
    }
  };
  return Object.fromEntries(Object.entries(s.fields).map(([k, v]) => [k, value(v)]));
}

/** A client of one server. */
export interface RlsClient {
  /** ShouldRateLimit; rejects with the gRPC error (its `code`) for an error status. */
  should(domain: string, descriptors: Descriptor[], hitsAddend?: number): Promise<RlsResponse>;
  /** grpc.health.v1.Health/Check: the status name. */
  health(service?: string): Promise<string>;
  close(): void;
}

type Unary = (
  req: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  cb: (error: grpc.ServiceError | null, res: unknown) => void,
) => void;

/** Connects to `address` (HOST:PORT), in plaintext unless `credentials` say otherwise (TLS, with or without a client certificate). */
export function rlsClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ChannelOptions = {},
): RlsClient {
  const def = protoLoader.loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(address, credentials, options);
  const health = new pkg.grpc.health.v1.Health(address, credentials, options);
  const call = <T>(client: grpc.Client, method: string, req: unknown): Promise<T> =>
    new Promise((resolve, reject) =>
      // A deadline, so a call that cannot connect (a TLS client of a plaintext port) fails instead of waiting for good.
      (client as unknown as Record<string, Unary>)[method]!.call(
        client,
        req,
        new grpc.Metadata(),
        { deadline: Date.now() + 10_000 },
        (error, res) => (error ? reject(error) : resolve(res as T)),
      ),
    );
  return {
    should: (domain, descriptors, hitsAddend = 0) =>
      call<RlsResponse>(rls, 'ShouldRateLimit', { domain, descriptors, hits_addend: hitsAddend }),
    health: async (service = '') => (await call<{ status: string }>(health, 'Check', { service })).status,
    close() {
      rls.close();
      health.close();
    },
  };
}
