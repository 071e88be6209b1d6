/** A rule's `cost` section. */
/**
 * The estimate reserved before forwarding, the response header or JSON field holding the actual cost, and what a
 * response that reports none is charged.
 */
import { describeValue } from '../../core/describe-value.js';
import { InvalidValue, parseBoolean, parseHeaderName, parsePositiveInt } from './values.js';
import type { CostSettings, PolicySettings } from './settings.js';
import { mapping, type Cursor, type Path } from './yaml-cursor.js';
import { policyName } from './policy-names.js';

const COST_FIELDS = ['estimate', 'header', 'json', 'missing', 'drainBytes', 'requestUsage'] as const;
/** Default `drainBytes`: bytes of an upstream answer read (and discarded) after its client left, to learn its usage. */
export const DEFAULT_DRAIN_BYTES = 1_048_576;
/** One segment of a JSON path: a property name or an array index; no spaces, no brackets, no empty segment. */
const JSON_SEGMENT = /^[A-Za-z0-9_$-]+$/;
const EXAMPLE = 'e.g. cost: { estimate: 500, header: x-usage-tokens } or cost: { estimate: 500, json: usage.total_tokens }';

/**
 * Parses a rule's `cost`. The estimate must fit every policy of the rule
 * (a request reserving more than a policy's limit could never pass), and
 * a shadow rule cannot have one: it never refuses, so there is nothing a
 * reservation would hold back.
 */
export function costSettings(c: Cursor, path: Path, value: unknown, policies: readonly PolicySettings[], shadow: boolean): CostSettings {
  const o = mapping(c, path, value, COST_FIELDS);
  if (shadow) c.fail(path, 'a shadow rule only reports, so it has nothing to reserve; remove cost or shadow.');
  if (o.estimate === undefined) c.fail(path, `needs an estimate: the units reserved before the request is forwarded (${EXAMPLE}).`);
  const estimate = c.at([...path, 'estimate'], () => parsePositiveInt(o.estimate));
  policies.forEach((p) => {
    if (estimate > p.limit)
      c.fail(
        [...path, 'estimate'],
        `${estimate} is larger than the limit ${p.limit} of policy ${JSON.stringify(policyName(p))}, so no request could ever pass; lower the estimate or raise the limit.`,
      );
  });
  if (o.header !== undefined && o.json !== undefined)
    c.fail([...path, 'json'], 'give either header or json, not both: the actual cost is read from one place.');
  if (o.header === undefined && o.json === undefined)
    c.fail(path, `needs header (a response header with the cost) or json (the body field with it), ${EXAMPLE}.`);
  const missing = missingCharge(c, path, o.missing, estimate, policies);
  const drainBytes =
    o.drainBytes === undefined
      ? DEFAULT_DRAIN_BYTES
      : c.at([...path, 'drainBytes'], () => parsePositiveInt(o.drainBytes, 1_073_741_824, true));
  const requestUsage = o.requestUsage === undefined ? false : c.at([...path, 'requestUsage'], () => parseBoolean(o.requestUsage));
  if (requestUsage && o.json === undefined)
    c.fail(
      [...path, 'requestUsage'],
      'asks a streaming request for its usage in the body (stream_options.include_usage), so it needs json: usage.… to read it.',
    );
  if (o.header !== undefined)
    return {
      estimate,
      missing,
      drainBytes,
      requestUsage,
      source: { kind: 'header', header: c.at([...path, 'header'], () => parseHeaderName(o.header)) },
    };
  const jsonPath = c.at([...path, 'json'], () => {
    const segments = typeof o.json === 'string' ? o.json.split('.') : [];
    if (segments.length === 0 || !segments.every((s) => JSON_SEGMENT.test(s)))
      throw new InvalidValue(
        `must be a dotted path to a number in the response body, such as "usage.total_tokens"; got ${describeValue(o.json)}.`,
      );
    return segments;
  });
  return { estimate, missing, drainBytes, requestUsage, source: { kind: 'json', path: jsonPath } };
}

/**
 * `cost.missing`: the units charged when a response that should report its
 * cost does not (fail-closed: a client that can make the usage go missing,
 * by not asking a stream for it or by leaving before it comes, must not pay
 * less than an honest one). Default: the smallest limit of the rule's
 * policies, the most one response can be admitted against. Never below the
 * estimate, which would make hiding the usage cheaper than reporting it.
 */
function missingCharge(c: Cursor, path: Path, value: unknown, estimate: number, policies: readonly PolicySettings[]): number {
  if (value === undefined) return Math.min(...policies.map((p) => p.limit));
  const missing = c.at([...path, 'missing'], () => parsePositiveInt(value));
  if (missing < estimate)
    c.fail(
      [...path, 'missing'],
      `${missing} is below the estimate ${estimate}: a client could then pay less by hiding its usage (not asking a stream for it, or leaving before it comes); use at least the estimate.`,
    );
  return missing;
}
