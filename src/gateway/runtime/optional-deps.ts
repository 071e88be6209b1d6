/** Lazy loading of the gateway's optional packages. */
/**
 * So `import 'floodgate'` never loads them, and a missing one fails with the package to install.
 */
import { ErrorCode, FloodgateError, type OtelMeter, type OtelTracer } from '../../index.js';
import { GATEWAY_BUNDLE, GATEWAY_PACKAGES, type GatewayPackageName } from './package-check.js';

/** The undici module. */
export type Undici = typeof import('undici');
/** The prom-client module. */
export type PromClient = typeof import('prom-client');
/** The yaml module. */
export type Yaml = typeof import('yaml');
/** The pino factory. */
export type PinoModule = typeof import('pino');
/** The ioredis module. */
export type Ioredis = typeof import('ioredis');
/**
 * The part of the @opentelemetry/api module the gateway uses, declared
 * structurally so the gateway's types do not need the package installed.
 */
export interface OtelApi {
  /** The metrics API (global MeterProvider). */
  readonly metrics: { getMeter(name: string, version?: string): OtelMeter };
  /** The trace API (global TracerProvider). */
  readonly trace: { getTracer(name: string, version?: string): OtelTracer };
}

const cache = new Map<string, Promise<unknown>>();

/**
 * Imports `name` once. A missing package rejects with MISSING_DEPENDENCY
 * naming the `npm install` to run, an ES-only one required where Node.js
 * cannot with the Node.js it needs; any other failure is passed through.
 */
function load<T>(name: GatewayPackageName, importer: () => Promise<unknown>): Promise<T> {
  let pending = cache.get(name);
  if (pending === undefined) {
    pending = importer().catch((error: unknown) => {
      cache.delete(name);
      const code = (error as NodeJS.ErrnoException | undefined)?.code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
        throw new FloodgateError(
          ErrorCode.MISSING_DEPENDENCY,
          `floodgate serve needs the package "${name}" for ${GATEWAY_PACKAGES[name].purpose}; install it next to floodgate: npm install ${name} (or npm install ${GATEWAY_BUNDLE} for all the gateway's packages)`,
          error,
        );
      }
      // An ES-only package (jose) required by the CommonJS build on a Node.js without require(esm) (before 20.19).
      if (code === 'ERR_REQUIRE_ESM')
        throw new FloodgateError(
          ErrorCode.MISSING_DEPENDENCY,
          `the package "${name}" (${GATEWAY_PACKAGES[name].purpose}) is an ES module, which the CommonJS build of floodgate loads only on Node.js 20.19 or later (this is ${process.version}); upgrade Node.js, or import floodgate/gateway from an ES module (the floodgate command does)`,
          error,
        );
      throw error;
    });
    cache.set(name, pending);
  }
  return pending as Promise<T>;
}

// Each import is spelled out so bundlers and the CommonJS build see a plain specifier.

/** Loads undici. */
const loadUndici = (): Promise<Undici> => load('undici', () => import('undici'));
/** Loads prom-client. */
const loadPromClient = (): Promise<PromClient> => load('prom-client', () => import('prom-client'));
/** Loads yaml. */
export const loadYaml = (): Promise<Yaml> => load('yaml', () => import('yaml'));
/** Loads pino. */
const loadPino = (): Promise<PinoModule> => load('pino', () => import('pino'));
/** Loads ioredis. */
export const loadIoredis = (): Promise<Ioredis> => load('ioredis', () => import('ioredis'));
/** Loads pg (node-postgres, the PostgreSQL store's client); typed by its caller (rules/postgres-store.ts). */
export const loadPg = (): Promise<unknown> => load('pg', () => import('pg'));
/** Loads jose (with `jwt:CLAIM` keys: it verifies or decodes the bearer token); typed by its caller (rules/jwt-claims.ts), as gRPC's are. */
export const loadJose = (): Promise<unknown> => load('jose', () => import('jose'));
/** Loads @opentelemetry/api (only with telemetry.otel: the operator's SDK registers the providers it reports to). */
export const loadOtelApi = (): Promise<OtelApi> => load('@opentelemetry/api', () => import('@opentelemetry/api'));

// The gRPC packages are typed by their caller (rls/grpc-deps.ts): these declarations, public through
// floodgate/gateway, must not name packages an app of the library has no reason to install.
/** Loads @grpc/grpc-js (the rate limit service). */
export const loadGrpcModule = (): Promise<unknown> => load('@grpc/grpc-js', () => import('@grpc/grpc-js'));

/** Loads the packages every `floodgate serve` needs, so a missing one is reported before anything starts. */
export async function loadGatewayDeps(): Promise<{ undici: Undici; prom: PromClient; pino: PinoModule }> {
  const [undici, prom, pino] = await Promise.all([loadUndici(), loadPromClient(), loadPino()]);
  return { undici, prom, pino };
}
