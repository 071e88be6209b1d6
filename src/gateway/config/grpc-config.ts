/** The `grpc` setting (the Envoy rate limit service). */
/**
 * `{ listen, config, tls, ... }` (with the options that tell it from envoyproxy/ratelimit, docs/rls.md), merged with
 * `--grpc`, `--rls-config` and the TLS flags.
 */
import { isAbsolute, resolve } from 'node:path';
import { describeValue } from '../../core/describe-value.js';
import { parseHeaders, parseListen, parseMs } from './values.js';
import type { GrpcSettings, GrpcTlsSettings } from './settings.js';
import { mapping, type Cursor, type Path } from './yaml-cursor.js';

const GRPC_FIELDS = [
  'listen',
  'config',
  'tls',
  'countRefused',
  'headers',
  'exposeLimitNames',
  'dynamicMetadata',
  'quotaMode',
  'shadowMode',
  'badConfigAtStart',
  'server',
  'maxConnectionAge',
  'maxConnectionAgeGrace',
] as const;
const TLS_FIELDS = ['cert', 'key', 'clientCa'] as const;
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
  if (value === undefined && flags.listen === undefined && flags.config === undefined && flags.tls === undefined) return undefined;
  const o = value === undefined ? {} : mapping(c, ['grpc'], value, GRPC_FIELDS);
  const listen = flags.listen ?? (o.listen === undefined ? undefined : c.at(['grpc', 'listen'], () => parseListen(o.listen)));
  let config = flags.config;
  if (config === undefined && o.config !== undefined) {
    const path = o.config;
    if (typeof path !== 'string' || path === '')
      c.fail(['grpc', 'config'], `must be a file or directory path; got ${describeValue(path)}.`);
    config = isAbsolute(path) ? path : resolve(dir, path);
  }
  if (listen === undefined) c.fail(['grpc'], `needs listen, the HOST:PORT of the gRPC listener (or --grpc HOST:PORT; ${EXAMPLE}).`);
  if (config === undefined)
    c.fail(['grpc'], `needs config, the envoyproxy/ratelimit YAML file or directory (or --rls-config PATH; ${EXAMPLE}).`);
  const tls = tlsSection(c, o.tls, dir, flags.tls);
  return { listen, config, ...(tls === undefined ? {} : { tls }), ...options(c, o) };
}

/** The service's options beside listen, config and tls; each only when set. */
function options(c: Cursor, o: Record<string, unknown>): Partial<GrpcSettings> {
  const out: { -readonly [K in keyof GrpcSettings]?: GrpcSettings[K] } = {};
  for (const field of ['countRefused', 'exposeLimitNames', 'dynamicMetadata', 'quotaMode', 'shadowMode'] as const) {
    const v = o[field];
    if (v === undefined) continue;
    if (typeof v !== 'boolean') c.fail(['grpc', field], `must be true or false; got ${describeValue(v)}.`);
    out[field] = v;
  }
  if (o.headers !== undefined) out.headers = c.at(['grpc', 'headers'], () => parseHeaders(o.headers));
  const bad = o.badConfigAtStart;
  if (bad !== undefined) {
    if (bad !== 'exit' && bad !== 'serve')
      c.fail(
        ['grpc', 'badConfigAtStart'],
        `must be "exit" (end the start, the default) or "serve" (log it and serve without limits until a good config loads); got ${describeValue(bad)}.`,
      );
    out.badConfigAtStart = bad;
  }
  const server = o.server;
  if (server !== undefined) {
    if (server !== 'http2' && server !== 'grpc-js')
      c.fail(
        ['grpc', 'server'],
        `must be "http2" (node:http2 with gRPC's framing, the default) or "grpc-js" (@grpc/grpc-js); got ${describeValue(server)}.`,
      );
    out.server = server;
  }
  if (o.maxConnectionAge !== undefined) out.maxConnectionAgeMs = c.at(['grpc', 'maxConnectionAge'], () => parseMs(o.maxConnectionAge));
  if (o.maxConnectionAgeGrace !== undefined) {
    if (o.maxConnectionAge === undefined) c.fail(['grpc', 'maxConnectionAgeGrace'], 'needs maxConnectionAge, the age it is a grace after.');
    out.maxConnectionAgeGraceMs = c.at(['grpc', 'maxConnectionAgeGrace'], () => parseMs(o.maxConnectionAgeGrace, true));
  }
  return out;
}

/** `grpc.tls: { cert, key, clientCa }` (paths relative to `dir`), each field replaced by its flag when given. */
function tlsSection(c: Cursor, value: unknown, dir: string, flags: Partial<GrpcTlsSettings> = {}): GrpcTlsSettings | undefined {
  const path: Path = ['grpc', 'tls'];
  const o = value === undefined || value === null ? {} : mapping(c, path, value, TLS_FIELDS);
  const file = (field: (typeof TLS_FIELDS)[number]): string | undefined => {
    const flag = flags[field];
    if (flag !== undefined) return flag;
    const v = o[field];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '') c.fail([...path, field], `must be the path of a PEM file; got ${describeValue(v)}.`);
    return isAbsolute(v) ? v : resolve(dir, v);
  };
  const [cert, key, clientCa] = [file('cert'), file('key'), file('clientCa')];
  if (cert === undefined && key === undefined && clientCa === undefined) return undefined;
  const example = 'e.g. tls: { cert: ./rls.crt, key: ./rls.key, clientCa: ./envoy-ca.crt }, or --grpc-cert, --grpc-key, --grpc-client-ca';
  if (cert === undefined) c.fail(path, `needs cert, the server's certificate (PEM; ${example}).`);
  if (key === undefined) c.fail(path, `needs key, the server's private key (PEM; ${example}).`);
  return { cert, key, ...(clientCa === undefined ? {} : { clientCa }) };
}
