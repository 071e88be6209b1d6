/** The rate limit service's gRPC definitions from the shipped .proto files, with protobufjs's generated coders. */
/**
 * ShouldRateLimit's messages go to and from the wire without a conversion to plain objects on every call.
 */
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type * as Grpc from '@grpc/grpc-js';
import type { Protobuf } from './grpc-deps.js';

/** The .proto files the service speaks, relative to the proto directory. */
const PROTO_FILES = ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'] as const;

/** A decoded message: its fields by their .proto names (the coders keep the case as written). */
type DecodedMessage = Record<string, unknown>;

/** What the server needs of the .proto files. */
export interface RlsProtos {
  /** envoy.service.ratelimit.v3.RateLimitService, its messages decoded as protobufjs message objects. */
  readonly rls: Grpc.ServiceDefinition;
  /** grpc.health.v1.Health (Check only). */
  readonly health: Grpc.ServiceDefinition;
  /** RateLimitUnit's names by number, lower case (`hour`), for a descriptor's `limit.unit`. */
  readonly overrideUnits: ReadonlyMap<number, string>;
  /** The numbers of RateLimitResponse.Code. */
  readonly codes: { readonly OK: number; readonly OVER_LIMIT: number };
  /** The numbers of RateLimitResponse.RateLimit.Unit by lower-case name. */
  readonly responseUnits: ReadonlyMap<string, number>;
}

type Type = InstanceType<Protobuf['Type']>;

/** A unary method over protobufjs coders: `encode` takes an object already in the message's shape (enums as numbers). */
function unary(path: string, request: Type, response: Type, encode: (value: unknown) => Buffer): Grpc.MethodDefinition<unknown, unknown> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: unknown) => asBuffer(request.encode(request.fromObject(value as DecodedMessage)).finish()),
    requestDeserialize: (bytes: Buffer) => request.decode(bytes),
    responseSerialize: encode,
    responseDeserialize: (bytes: Buffer) => response.toObject(response.decode(bytes), { enums: String }),
  };
}

/** protobufjs writes into a Buffer under Node already: no copy. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function enumNumbers(root: InstanceType<Protobuf['Root']>, name: string): Record<string, number> {
  return (root.lookup(name) as InstanceType<Protobuf['Enum']>).values;
}

/**
 * Loads the service's .proto files from `dir` (imports of google/protobuf/* come with protobufjs).
 * @throws the parse error of a missing or broken .proto file
 */
export function loadRlsProtos(protobuf: Protobuf, dir: string): RlsProtos {
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) => {
    if (isAbsolute(target)) return target;
    const inDir = join(dir, target);
    // protobufjs bundles the well-known google/protobuf types and uses them when a path is not found on disk.
    return existsSync(inDir) ? inDir : target;
  };
  root.loadSync(
    PROTO_FILES.map((file) => join(dir, file)),
    { keepCase: true },
  );
  root.resolveAll();
  const type = (name: string): Type => root.lookupType(name);
  const rlsRequest = type('envoy.service.ratelimit.v3.RateLimitRequest');
  const rlsResponse = type('envoy.service.ratelimit.v3.RateLimitResponse');
  const healthRequest = type('grpc.health.v1.HealthCheckRequest');
  const healthResponse = type('grpc.health.v1.HealthCheckResponse');
  const codes = enumNumbers(root, 'envoy.service.ratelimit.v3.RateLimitResponse.Code');
  const responseUnits = enumNumbers(root, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit');
  const overrideUnits = enumNumbers(root, 'envoy.type.v3.RateLimitUnit');
  return {
    rls: {
      ShouldRateLimit: unary('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', rlsRequest, rlsResponse, (value) =>
        // Written by writeResponse in the message's own shape: encoded as it is, without fromObject's pass.
        asBuffer(rlsResponse.encode(value as DecodedMessage).finish()),
      ),
    },
    health: {
      Check: unary('/grpc.health.v1.Health/Check', healthRequest, healthResponse, (value) =>
        asBuffer(healthResponse.encode(healthResponse.fromObject(value as DecodedMessage)).finish()),
      ),
    },
    overrideUnits: new Map(Object.entries(overrideUnits).map(([name, n]) => [n, name.toLowerCase()])),
    codes: { OK: codes.OK!, OVER_LIMIT: codes.OVER_LIMIT! },
    responseUnits: new Map(Object.entries(responseUnits).map(([name, n]) => [name.toLowerCase(), n])),
  };
}
