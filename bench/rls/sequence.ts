/** The fixed request sequence the compatibility check sends, written against envoyproxy/ratelimit's example configurations (examples/ratelimit/config). */
import type { Descriptor, RlsRequest } from './client.js';

/** One step: the same request sent `times` times in a row. */
export interface Step {
  /** What the step exercises, shown next to any difference. */
  readonly label: string;
  readonly request: RlsRequest;
  readonly times: number;
  /** True for the steps that meet a per-second rule; they come first (see compare.ts). */
  readonly perSecond?: boolean;
  /**
   * A refused request whose other descriptors envoyproxy/ratelimit counts and
   * floodgate, deciding all or nothing, does not (docs/rls.md, "Differs"):
   * their `limit_remaining` is reported, not counted as a difference.
   */
  readonly allOrNothing?: boolean;
}

const d = (...entries: (readonly [string, string])[]): Descriptor => entries;
const rl = (label: string, times: number, ...descriptors: Descriptor[]): Step => ({ label, times, request: { domain: 'rl', descriptors } });

/**
 * Every rule of example.yaml (domain `rl`) and config.yaml (domain
 * `mongo_cps`) is hit past its limit, each step with values of its own so
 * steps do not share counters except where a step says so. The steps
 * that meet a per-second rule come first: sent right after a second
 * boundary, those dozen calls fall in one second; the rest, per minute,
 * in one minute (compare.ts checks both, on each server).
 */
export const EXAMPLE_SEQUENCE: readonly Step[] = [
  // config.yaml: 500 per second, reached with hits_addend rather than 500 calls.
  {
    label: 'mongo_cps users: 499 hits at once',
    times: 1,
    request: { domain: 'mongo_cps', descriptors: [d(['database', 'users'])], hitsAddend: 499 },
    perSecond: true,
  },
  {
    label: 'mongo_cps users: up to the limit and past it',
    times: 3,
    request: { domain: 'mongo_cps', descriptors: [d(['database', 'users'])] },
    perSecond: true,
  },
  {
    label: 'mongo_cps default',
    times: 2,
    request: { domain: 'mongo_cps', descriptors: [d(['database', 'default'])] },
    perSecond: true,
  },
  { label: 'mongo_cps: value without a rule', times: 2, request: { domain: 'mongo_cps', descriptors: [d(['database', 'other'])] } },
  { label: 'mongo_cps: key without a rule', times: 1, request: { domain: 'mongo_cps', descriptors: [d(['table', 'users'])] } },
  {
    label: 'mongo_cps: hits_addend past the limit at once',
    times: 1,
    request: { domain: 'mongo_cps', descriptors: [d(['database', 'default'])], hitsAddend: 600 },
    perSecond: true,
  },
  { ...rl('foo + baz, any value (1/second)', 2, d(['foo', 'f5'], ['baz', 'b1'])), perSecond: true },
  // example.yaml, per minute from here on
  rl('category account (4/minute)', 5, d(['category', 'account'])),
  rl('proxy → bkthomps (2/minute)', 3, d(['source_cluster', 'proxy'], ['destination_cluster', 'bkthomps'])),
  rl('proxy → mock (1/minute)', 2, d(['source_cluster', 'proxy'], ['destination_cluster', 'mock'])),
  rl('proxy → override (2/minute)', 3, d(['source_cluster', 'proxy'], ['destination_cluster', 'override'])),
  rl('proxy → fake (2/minute, named)', 3, d(['source_cluster', 'proxy'], ['destination_cluster', 'fake'])),
  rl('proxy → no rule', 1, d(['source_cluster', 'proxy'], ['destination_cluster', 'other'])),
  rl('proxy alone: no rule at that depth', 1, d(['source_cluster', 'proxy'])),
  rl('foo, any value (2/minute)', 3, d(['foo', 'f1'])),
  rl('foo + bar, any value (3/minute)', 4, d(['foo', 'f2'], ['bar', 'b1'])),
  rl('foo + bar bkthomps (1/minute)', 2, d(['foo', 'f3'], ['bar', 'bkthomps'])),
  rl('foo + bar banned (0/minute)', 2, d(['foo', 'f4'], ['bar', 'banned'])),
  rl('foo + baz not-so-shady (3/minute)', 4, d(['foo', 'f6'], ['baz', 'not-so-shady'])),
  rl('foo + baz shady (3/minute, shadow mode)', 4, d(['foo', 'f7'], ['baz', 'shady'])),
  rl('foo + bay (unlimited)', 3, d(['foo', 'f8'], ['bay', 'x'])),
  rl('foo + unknown key: no rule', 1, d(['foo', 'f9'], ['nope', 'x'])),
  rl('unspec (2/minute, detailed metric)', 3, d(['unspec', 'u1'])),
  rl('qux (unlimited)', 2, d(['qux', 'q'])),
  rl('service_1 (1/minute, quota mode)', 2, d(['service', 'service_1'])),
  rl('service_2 (2/minute, quota mode)', 3, d(['service', 'service_2'])),
  rl('two descriptors: both under their limits', 1, d(['foo', 'f10']), d(['unspec', 'u2'])),
  { ...rl('two descriptors: one over (category account is spent)', 1, d(['foo', 'f11']), d(['category', 'account'])), allOrNothing: true },
  // category account replaces bkthomps: with both in one request, bkthomps is not counted nor reported.
  rl('replaces: account with foo + bar bkthomps', 2, d(['category', 'account']), d(['foo', 'f12'], ['bar', 'bkthomps'])),
  rl(
    'replaces: override replaces banned_limit',
    2,
    d(['source_cluster', 'proxy'], ['destination_cluster', 'override']),
    d(['foo', 'f13'], ['bar', 'banned']),
  ),
  rl('shadow and a real limit in one request', 1, d(['foo', 'f7'], ['baz', 'shady']), d(['foo', 'f1'])),
  // Edge cases of the request itself.
  { label: 'unknown domain', times: 1, request: { domain: 'no-such-domain', descriptors: [d(['foo', 'x'])] } },
  { label: 'empty domain', times: 1, request: { domain: '', descriptors: [d(['foo', 'x'])] } },
  { label: 'no descriptors', times: 1, request: { domain: 'rl', descriptors: [] } },
  { label: 'descriptor without entries', times: 1, request: { domain: 'rl', descriptors: [d()] } },
];
