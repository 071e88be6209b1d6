/** The `grpc` setting (the Envoy rate limit service): `{ listen, config }`, merged with `--grpc` and `--rls-config`. */
import { isAbsolute, resolve } from 'node:path';
import { describe } from '../../duration.js';
import { parseListen } from './values.js';
import type { GrpcSettings } from './settings.js';
import { mapping, type Cursor } from './yaml-cursor.js';

const GRPC_FIELDS = ['listen', 'config'] as const;
const EXAMPLE = 'e.g. grpc: { listen: 127.0.0.1:8081, config: ./ratelimit/ }';

/** The config error of the rate limit service under `--workers`. */
export const GRPC_WORKERS =
  'the rate limit service (grpc) runs in one process and does not combine with --workers yet; run one process per core behind a gRPC load balancer, on Redis, so they share the limits.';

/**
 * Parses the config file's `grpc` value (a relative `config` is resolved
 * from `dir`, the config file's directory) and lays the command line's
 * `--grpc` / `--rls-config` over it. Undefined when neither sets anything.
 */
export function grpcSection(c: Cursor, value: unknown, dir: string, flags: Partial<GrpcSettings> = {}): GrpcSettings | undefined {
  if (value === undefined && flags.listen === undefined && flags.config === undefined) return undefined;
  const o = value === undefined ? {} : mapping(c, ['grpc'], value, GRPC_FIELDS);
  const listen = flags.listen ?? (o.listen === undefined ? undefined : c.at(['grpc', 'listen'], () => parseListen(o.listen)));
  let config = flags.config;
  if (config === undefined && o.config !== undefined) {
    const path = o.config;
    if (typeof path !== 'string' || path === '') c.fail(['grpc', 'config'], `must be a file or directory path; got ${describe(path)}.`);
    config = isAbsolute(path) ? path : resolve(dir, path);
  }
  if (listen === undefined) c.fail(['grpc'], `needs listen, the HOST:PORT of the gRPC listener (or --grpc HOST:PORT; ${EXAMPLE}).`);
  if (config === undefined)
    c.fail(['grpc'], `needs config, the envoyproxy/ratelimit YAML file or directory (or --rls-config PATH; ${EXAMPLE}).`);
  return { listen, config };
}
