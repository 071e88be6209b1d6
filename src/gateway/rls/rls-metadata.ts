/** The rate limit response's dynamic metadata (`grpc.dynamicMetadata`), as envoyproxy/ratelimit sets it. */
/**
 * A google.protobuf.Struct that Envoy's rate limit filter emits under its own namespace for the filters after it:
 * the request (domain, descriptors, hits) and the merged `metadata` of the config entries whose limits let it pass,
 * so a route can pick the upstream whose quota is left.
 */
import type { RlsMetadata, RlsMetadataValue } from './rls-config.js';
import type { RlsRequestIn } from './rls-decide.js';
import type { RlsStatus } from './rls-status.js';

/**
 * A google.protobuf.Value in the message's own shape (one of its fields set). Its field names are protobufjs's own
 * definitions of the well-known types, which are in camel case whatever the loader's keepCase.
 */
interface StructValueMessage {
  nullValue?: 0;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMessage;
  listValue?: { values: StructValueMessage[] };
}

/** A google.protobuf.Struct in the message's own shape. */
export interface StructMessage {
  fields: Record<string, StructValueMessage>;
}

function isMapping(v: RlsMetadataValue | undefined): v is RlsMetadata {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Merges `src` into `dest` as envoyproxy/ratelimit does: a field `dest` lacks is added; where both hold a mapping,
 * the two are merged; otherwise the first descriptor's value stays. Copies before it changes a mapping, so the
 * config's own objects are never touched.
 */
function merge(dest: Record<string, RlsMetadataValue>, src: RlsMetadata): void {
  for (const [key, value] of Object.entries(src)) {
    const had = dest[key];
    if (had === undefined) dest[key] = value;
    else if (isMapping(had) && isMapping(value)) {
      const copy = { ...had };
      merge(copy, value);
      dest[key] = copy;
    }
  }
}

function toValue(v: RlsMetadataValue): StructValueMessage {
  if (v === null) return { nullValue: 0 };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: (v as readonly RlsMetadataValue[]).map(toValue) } };
  return { structValue: toStruct(v as RlsMetadata) };
}

function toStruct(m: RlsMetadata): StructMessage {
  const fields: Record<string, StructValueMessage> = {};
  for (const [key, value] of Object.entries(m)) fields[key] = toValue(value);
  return { fields };
}

/** A descriptor's `limit` as the reference prints it (Go's text format of the message, zero fields left out). */
function overrideText(o: NonNullable<RlsRequestIn['descriptors'][number]['override']>): string {
  const unit = `unit:${o.unit.toUpperCase()}`;
  return o.requestsPerUnit === 0 ? unit : `requests_per_unit:${o.requestsPerUnit} ${unit}`;
}

/**
 * The dynamic metadata of an answer: `domain`; `descriptors`, one per request descriptor with its `entries` as
 * `key=value` strings, its `limit` (Envoy's override, as text) and its own `hitsAddend` when set; the request's
 * `hitsAddend` when not 0; and `metadata`, the merged `metadata` of the limits of the descriptors that were not over
 * (first descriptor first), when any has some.
 */
export function dynamicMetadata(request: RlsRequestIn, statuses: readonly RlsStatus[]): StructMessage {
  const descriptors = request.descriptors.map((d): StructValueMessage => {
    const fields: Record<string, StructValueMessage> = {
      entries: { listValue: { values: d.entries.map((e) => ({ stringValue: `${e.key}=${e.value}` })) } },
    };
    if (d.override !== undefined) fields.limit = { stringValue: overrideText(d.override) };
    if (d.hitsAddend !== undefined) fields.hitsAddend = { numberValue: d.hitsAddend };
    return { structValue: { fields } };
  });
  const fields: Record<string, StructValueMessage> = {
    domain: { stringValue: request.domain },
    descriptors: { listValue: { values: descriptors } },
  };
  if (request.hitsAddend !== 0) fields.hitsAddend = { numberValue: request.hitsAddend };
  let passed: Record<string, RlsMetadataValue> | undefined;
  for (const s of statuses) if (s.code === 'OK' && s.metadata !== undefined) merge((passed ??= {}), s.metadata);
  if (passed !== undefined && Object.keys(passed).length > 0) fields.metadata = { structValue: toStruct(passed) };
  return { fields };
}
