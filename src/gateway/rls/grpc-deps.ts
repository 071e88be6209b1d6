/** The rate limit service's gRPC packages with their types: loaded through optional-deps.ts (its MISSING_DEPENDENCY error), typed here so the gateway's public declarations never name them. */
import { loadGrpcModule, loadProtoLoaderModule } from '../serve/optional-deps.js';

/** The @grpc/grpc-js module. */
export type GrpcJs = typeof import('@grpc/grpc-js');
/** The @grpc/proto-loader module. */
export type ProtoLoader = typeof import('@grpc/proto-loader');

/** Loads @grpc/grpc-js (the RLS server); its exports whether an ES import puts them on `default` or not (it is CommonJS). */
export async function loadGrpc(): Promise<GrpcJs> {
  const mod = (await loadGrpcModule()) as GrpcJs;
  return (mod as { default?: GrpcJs }).default ?? mod;
}

/** Loads @grpc/proto-loader (the RLS server's .proto files), as {@link loadGrpc} does. */
export async function loadProtoLoader(): Promise<ProtoLoader> {
  const mod = (await loadProtoLoaderModule()) as ProtoLoader;
  return (mod as { default?: ProtoLoader }).default ?? mod;
}
