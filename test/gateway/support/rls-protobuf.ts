// protobufjs over the shipped .proto files, the oracle the RLS codec tests hold the hand-written codec to, and their seeded PRNG.
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { MAX_ENTRIES, maxRequestsPerUnit, RLS_UNITS, type RlsUnit } from '../../../src/gateway/rls/rls-config.js';
import { MAX_DESCRIPTORS, RlsRequestError, type RlsDescriptorIn, type RlsRequestIn } from '../../../src/gateway/rls/rls-decide.js';

/** The shipped .proto files, loaded as the server loaded them before the codec (keepCase, well-known types from protobufjs). */
export function loadRoot(): protobuf.Root {
  const dir = fileURLToPath(new URL('../../../proto/', import.meta.url));
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) => {
    if (isAbsolute(target)) return target;
    const inDir = join(dir, target);
    // protobufjs bundles the well-known google/protobuf types and uses them when a path is not found on disk.
    return existsSync(inDir) ? inDir : target;
  };
  root.loadSync(
    ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'].map((f) => join(dir, f)),
    { keepCase: true },
  );
  root.resolveAll();
  return root;
}

/** An enum's numbers by name. */
export function enumOf(root: protobuf.Root, name: string): Record<string, number> {
  return (root.lookup(name) as protobuf.Enum).values;
}

/** A seeded PRNG (mulberry32) in [0, 1): the same cases on every run, unlike Math.random. */
export { mulberry32 as prng } from '../../accuracy/traffic.js';

const MAX_KEY_LENGTH = 1_024;

function text(value: unknown, what: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new RlsRequestError(`${what} must be a string`);
  if (value.length > MAX_KEY_LENGTH) throw new RlsRequestError(`${what} is longer than ${MAX_KEY_LENGTH} characters`);
  return value;
}

/** A protobufjs 64-bit value (a Long when the long package is installed, as it is beside protobufjs). */
interface LongLike {
  toNumber(): number;
}

function count(value: unknown, what: string): number {
  const n =
    typeof value === 'object' && value !== null && typeof (value as LongLike).toNumber === 'function'
      ? (value as LongLike).toNumber()
      : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw new RlsRequestError(`${what} must be a whole number`);
  return n;
}

/**
 * Reads a RateLimitRequest protobufjs decoded, as the service did before its codec: kept, frozen, as the oracle
 * the codec is held to (same refusals, same messages, same order).
 * @param units - RateLimitUnit's lower-case names by number
 * @throws RlsRequestError for a field that cannot be used
 */
export function readRequest(raw: unknown, units: ReadonlyMap<number, string>): RlsRequestIn {
  const r = (raw ?? {}) as { domain?: unknown; descriptors?: unknown; hits_addend?: unknown };
  const list = Array.isArray(r.descriptors) ? (r.descriptors as unknown[]) : [];
  if (list.length > MAX_DESCRIPTORS) throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
  const descriptors = list.map((item, i): RlsDescriptorIn => {
    const d = (item ?? {}) as { entries?: unknown; limit?: unknown; hits_addend?: unknown };
    const given = Array.isArray(d.entries) ? (d.entries as unknown[]) : [];
    if (given.length > MAX_ENTRIES) throw new RlsRequestError(`descriptors[${i}] has more than ${MAX_ENTRIES} entries`);
    const entries = given.map((e, j) => {
      const entry = (e ?? {}) as { key?: unknown; value?: unknown };
      const key = text(entry.key, `descriptors[${i}].entries[${j}].key`);
      if (key === '') throw new RlsRequestError(`descriptors[${i}].entries[${j}].key must not be empty`);
      return { key, value: text(entry.value, `descriptors[${i}].entries[${j}].value`) };
    });
    let override: RlsDescriptorIn['override'];
    if (d.limit !== undefined && d.limit !== null) {
      const l = d.limit as { requests_per_unit?: unknown; unit?: unknown };
      const unit = (typeof l.unit === 'number' ? units.get(l.unit) : undefined) ?? '';
      if (!(RLS_UNITS as readonly string[]).includes(unit)) throw new RlsRequestError(`descriptors[${i}].limit.unit must be a known unit`);
      const requestsPerUnit = count(l.requests_per_unit, `descriptors[${i}].limit.requests_per_unit`);
      // As the config loader checks a file's limits: past this the counts would not stay exact, and the limiter refuses it.
      if (requestsPerUnit > maxRequestsPerUnit(unit as RlsUnit))
        throw new RlsRequestError(
          `descriptors[${i}].limit.requests_per_unit must be at most ${maxRequestsPerUnit(unit as RlsUnit)} per ${unit} (limit × window under 2^50 ms)`,
        );
      override = { requestsPerUnit, unit: unit as RlsUnit };
    }
    const addend = d.hits_addend as { value?: unknown } | null | undefined;
    const hitsAddend = addend === undefined || addend === null ? undefined : count(addend.value ?? 0, `descriptors[${i}].hits_addend`);
    return { entries, ...(override === undefined ? {} : { override }), ...(hitsAddend === undefined ? {} : { hitsAddend }) };
  });
  return { domain: text(r.domain, 'domain'), descriptors, hitsAddend: count(r.hits_addend ?? 0, 'hits_addend') };
}
