/** The rate limit service's packages with their types (@grpc/grpc-js, protobufjs). */
/**
 * Loaded through optional-deps.ts (its MISSING_DEPENDENCY error), typed here so the gateway's public declarations
 * never name them.
 */
import { loadGrpcModule, loadProtobufModule } from '../runtime/optional-deps.js';

/** The @grpc/grpc-js module. */
export type GrpcJs = typeof import('@grpc/grpc-js');
/** The protobufjs module. */
export type Protobuf = typeof import('protobufjs');

/** Loads @grpc/grpc-js (the RLS server); its exports whether an ES import puts them on `default` or not (it is CommonJS). */
export async function loadGrpc(): Promise<GrpcJs> {
  const mod = (await loadGrpcModule()) as GrpcJs;
  return (mod as { default?: GrpcJs }).default ?? mod;
}

/** Loads protobufjs (the RLS server's .proto files and message coders), as {@link loadGrpc} does. */
export async function loadProtobuf(): Promise<Protobuf> {
  const mod = (await loadProtobufModule()) as Protobuf;
  return (mod as { default?: Protobuf }).default ?? mod;
}
