/** The rate limit service's optional package with its types (@grpc/grpc-js, for `grpc.server: grpc-js`). */
/**
 * Loaded through optional-deps.ts (its MISSING_DEPENDENCY error), typed here so the gateway's public declarations
 * never name them.
 */
import { loadGrpcModule } from '../runtime/optional-deps.js';

/** The @grpc/grpc-js module. */
export type GrpcJs = typeof import('@grpc/grpc-js');

/** Loads @grpc/grpc-js (the RLS server); its exports whether an ES import puts them on `default` or not (it is CommonJS). */
export async function loadGrpc(): Promise<GrpcJs> {
  const mod = (await loadGrpcModule()) as GrpcJs;
  return (mod as { default?: GrpcJs }).default ?? mod;
}
