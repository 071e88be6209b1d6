/** The config file's `telemetry` section: OpenTelemetry besides the Prometheus metrics, off unless asked for. */
import type { TelemetrySettings } from './settings.js';
import { parseBoolean } from './values.js';
import { isObject, mapping, type Cursor } from './yaml-cursor.js';

const TELEMETRY_FIELDS = ['otel'] as const;

/** Parses `telemetry: { otel: true }`; undefined when the section is absent. */
export function telemetrySettings(c: Cursor, value: unknown): TelemetrySettings | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) c.fail(['telemetry'], 'must be a mapping, e.g. telemetry: { otel: true }.');
  const o = mapping(c, ['telemetry'], value, TELEMETRY_FIELDS);
  const otel = o.otel === undefined ? false : c.at(['telemetry', 'otel'], () => parseBoolean(o.otel));
  return { otel };
}
