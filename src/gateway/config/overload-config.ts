/** The config file's `overload` section: the upstream's in-flight limit, its priority classes, tenants and queue. */
import { OverloadLimiter, type AdaptiveControllerOptions } from '../../index.js';
import { describeValue } from '../../core/describe-value.js';
import { parseKeySpec } from './key-spec.js';
import { matchSettings } from './rule-sections.js';
import type { OverloadSettings, PriorityClassSettings } from './settings.js';
import { InvalidValue, parseMs, parsePositiveInt } from './values.js';
import { isObject, mapping, type Cursor, type Path } from './yaml-cursor.js';

const FIELDS = ['limit', 'adaptive', 'priorities', 'tenant', 'tenantShare', 'queue', 'errorStatuses'] as const;
const CLASS_FIELDS = ['name', 'match'] as const;
const QUEUE_FIELDS = ['timeout', 'maxQueue'] as const;
const CLASS_NAME = /^[A-Za-z0-9_.-]{1,32}$/;
/** The longest wait: each waiting request is an open client connection. */
const MAX_WAIT_MS = 60_000;

/**
 * Parses the `overload` section; undefined when absent.
 *
 * @param connections - `proxy.connections`: the adaptive limit's default maxLimit is no higher. The gate orders waiters by
 *   class and tenant only while its limit fits the pool: a request it admits past the pool's size waits for a connection in
 *   arrival order (UpstreamQueue), so a critical request would queue behind sheddable ones admitted before it.
 */
export function overloadSettings(c: Cursor, value: unknown, connections = Infinity): OverloadSettings | undefined {
  if (value === undefined) return undefined;
  const path: Path = ['overload'];
  const o = mapping(c, path, value, FIELDS);
  const limit =
    o.limit === undefined || o.limit === 'adaptive'
      ? ('adaptive' as const)
      : c.at([...path, 'limit'], () => parsePositiveInt(o.limit, 1_000_000));
  let adaptive: AdaptiveControllerOptions = {};
  if (o.adaptive !== undefined) {
    if (!isObject(o.adaptive))
      c.fail([...path, 'adaptive'], `must be the adaptive limit's options, e.g. { maxLimit: 200 }; got ${describeValue(o.adaptive)}.`);
    if (limit !== 'adaptive') c.fail([...path, 'adaptive'], `applies to limit: adaptive, but limit is ${limit}; remove one of them.`);
    adaptive = o.adaptive as AdaptiveControllerOptions;
  }
  if (limit === 'adaptive' && adaptive.maxLimit === undefined && connections < 1000) {
    for (const field of ['minLimit', 'initialLimit', 'probeLimit'] as const) {
      const n = adaptive[field];
      if (typeof n === 'number' && n > connections)
        c.fail(
          [...path, 'adaptive', field],
          `is ${n}, above proxy.connections ${connections}: requests admitted past the pool's size wait for a connection in arrival order, not by class and tenant; lower ${field} or raise proxy.connections.`,
        );
    }
    adaptive = { ...adaptive, maxLimit: connections };
  }
  const priorities =
    o.priorities === undefined ? [{ name: 'default', match: undefined }] : classList(c, [...path, 'priorities'], o.priorities);
  const tenant =
    o.tenant === undefined
      ? ({ kind: 'ip' } as const)
      : c.at([...path, 'tenant'], () => {
          const key = parseKeySpec(o.tenant);
          if (key.kind !== 'ip' && key.kind !== 'global' && key.kind !== 'header')
            throw new InvalidValue(
              `must be ip, global or header:NAME (whose line a waiting request joins); got ${describeValue(o.tenant)}.`,
            );
          return key;
        });
  const queue = o.queue === undefined ? { timeoutMs: 1000, maxQueue: 1000 } : queueSettings(c, [...path, 'queue'], o.queue);
  const errorStatuses =
    o.errorStatuses === undefined
      ? [503, 504]
      : c.at([...path, 'errorStatuses'], () => {
          if (!Array.isArray(o.errorStatuses))
            throw new InvalidValue(`must be a list of HTTP statuses, e.g. [503, 504]; got ${describeValue(o.errorStatuses)}.`);
          return o.errorStatuses.map((s) => {
            if (typeof s !== 'number' || !Number.isInteger(s) || s < 400 || s > 599)
              throw new InvalidValue(`must list error statuses from 400 to 599; got ${describeValue(s)}.`);
            return s;
          });
        });
  const tenantShare =
    o.tenantShare === undefined
      ? 1
      : c.at([...path, 'tenantShare'], () => {
          const v = o.tenantShare;
          if (typeof v !== 'number' || !(v > 0 && v <= 1))
            throw new InvalidValue(
              `must be the most of the limit one tenant may hold in flight, above 0 and at most 1, e.g. 0.25; got ${describeValue(v)}.`,
            );
          if (tenant.kind === 'global' && v < 1)
            throw new InvalidValue(
              'shares the limit between tenants, but tenant is global (every request is one tenant); set tenant: ip or header:NAME.',
            );
          return v;
        });
  const settings: OverloadSettings = { limit, adaptive, priorities, tenant, tenantShare, queue, errorStatuses };
  // The library checks the controller's options (names, ranges, how the limits nest) with its own typed errors.
  c.at([...path, 'adaptive'], () => overloadLimiter(settings));
  return settings;
}

/** The library limiter the section describes (one per gateway process). */
export function overloadLimiter(settings: OverloadSettings): OverloadLimiter {
  const q = settings.queue;
  return new OverloadLimiter({
    limit: settings.limit,
    ...(settings.limit === 'adaptive' ? { adaptive: settings.adaptive } : {}),
    priorities: settings.priorities.map((p) => p.name),
    defaultPriority: settings.priorities.find((p) => p.match === undefined)!.name,
    queue: q === false ? false : { timeout: q.timeoutMs, maxQueue: q.maxQueue },
    tenantShare: settings.tenantShare,
  });
}

function classList(c: Cursor, path: Path, value: unknown): PriorityClassSettings[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 16)
    c.fail(
      path,
      `must list 1 to 16 priority classes, highest first, e.g. [{ name: critical, match: { path: /checkout } }, { name: default }]; got ${describeValue(value)}.`,
    );
  const names = new Set<string>();
  const classes = value.map((entry, i) => {
    const at = [...path, i];
    const e = isObject(entry) ? mapping(c, at, entry, CLASS_FIELDS) : { name: entry, match: undefined };
    const name = c.at([...at, 'name'], () => {
      if (typeof e.name !== 'string' || !CLASS_NAME.test(e.name))
        throw new InvalidValue(`must be 1–32 letters, digits, ".", "_" or "-"; got ${describeValue(e.name)}.`);
      return e.name;
    });
    if (names.has(name)) c.fail([...at, 'name'], `names the class ${JSON.stringify(name)} twice; give each class a distinct name.`);
    names.add(name);
    return { name, match: e.match === undefined ? undefined : matchSettings(c, [...at, 'match'], e.match) };
  });
  const rest = classes.filter((p) => p.match === undefined);
  if (rest.length !== 1)
    c.fail(
      path,
      rest.length === 0
        ? 'needs one class without a match: the class of every request no other class matches, e.g. - { name: default }.'
        : `has ${rest.length} classes without a match (${rest.map((p) => p.name).join(', ')}); only one can take the requests no other class matches.`,
    );
  return classes;
}

function queueSettings(c: Cursor, path: Path, value: unknown): { timeoutMs: number; maxQueue: number } | false {
  if (value === false) return false;
  const q = mapping(c, path, value, QUEUE_FIELDS);
  const timeoutMs =
    q.timeout === undefined
      ? 1000
      : c.at([...path, 'timeout'], () => {
          const ms = parseMs(q.timeout);
          if (ms > MAX_WAIT_MS)
            throw new InvalidValue(
              `must be at most 1m: each waiting request keeps its client's connection open; got ${describeValue(q.timeout)}.`,
            );
          return ms;
        });
  const maxQueue = q.maxQueue === undefined ? 1000 : c.at([...path, 'maxQueue'], () => parsePositiveInt(q.maxQueue, 1_000_000));
  return { timeoutMs, maxQueue };
}
