/** µs per ShouldRateLimit decode and encode for the rls benchmark's messages: protobufjs + readRequest against rls-codec.ts. */
/**
 * `node --import tsx bench/rls/codec-cost.ts [--ops N] [--rounds R]`
 *
 * Decodes the rls scenario's 100 requests (domain `bench`, an org and a user
 * descriptor: bench/scenarios/rls.ts) round-robin, and encodes the answer the
 * server gives them at steady state (the org's descriptor OK, the user's over
 * its 50 per hour), without headers as `floodgate serve --grpc` answers by
 * default and with the IETF RateLimit fields. Prints the median of R rounds of
 * N operations each. In-process and single-threaded: no server, no build.
 */
import { parseArgs } from 'node:util';
import { decodeRateLimitRequest, encodeRateLimitResponse } from '../../src/gateway/rls/rls-codec.js';
import type { RlsAnswer } from '../../src/gateway/rls/rls-decide.js';
import { writeResponse, type WireOptions } from '../../src/gateway/rls/rls-wire.js';
import { enumOf, loadRoot, readRequest } from '../../test/gateway/support/rls-protobuf.js';
import rls from '../scenarios/rls.js';

const { values } = parseArgs({ options: { ops: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '5' } } });
const OPS = Number(values.ops);
const ROUNDS = Number(values.rounds);

const root = loadRoot();
const Req = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest');
const Res = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse');
const units = new Map(Object.entries(enumOf(root, 'envoy.type.v3.RateLimitUnit')).map(([name, n]) => [n, name.toLowerCase()]));

const requests = (rls.grpc!.messages as object[]).map((m) => Req.encode(Req.fromObject(m)).finish() as Buffer);

const answer: RlsAnswer = {
  overall: 'OVER_LIMIT',
  statuses: [
    {
      code: 'OK',
      outcome: 'ok',
      remaining: 99_999_000,
      resetMs: 1_234_567,
      limit: { requestsPerUnit: 100_000_000, unit: 'hour', name: undefined },
      metricKey: 'org',
    },
    {
      code: 'OVER_LIMIT',
      outcome: 'over_limit',
      remaining: 0,
      resetMs: 1_234_567,
      limit: { requestsPerUnit: 50, unit: 'hour', name: undefined },
      metricKey: 'user',
    },
  ],
};
const plain = writeResponse(answer, { headers: 'none', exposeLimitNames: false } satisfies WireOptions);
const withHeaders = writeResponse(answer, { headers: ['ietf'], exposeLimitNames: false });

let sink = 0;

/** The median µs per call of `op` (given the call's index) over the rounds. */
function measure(op: (i: number) => number): number {
  for (let i = 0; i < OPS / 4; i++) sink += op(i);
  const perOp: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < OPS; i++) sink += op(i);
    perOp.push(Number(process.hrtime.bigint() - start) / 1000 / OPS);
  }
  return perOp.sort((a, b) => a - b)[ROUNDS >> 1]!;
}

const rows: Array<[string, number, number]> = [
  [
    'decode RateLimitRequest (org + user)',
    measure((i) => readRequest(Req.decode(requests[i % 100]!), units).descriptors.length),
    measure((i) => decodeRateLimitRequest(requests[i % 100]!).descriptors.length),
  ],
  [
    'encode RateLimitResponse (2 statuses)',
    measure(() => Res.encode(plain).finish().length),
    measure(() => encodeRateLimitResponse(plain).length),
  ],
  [
    'encode RateLimitResponse (2 statuses, ietf headers)',
    measure(() => Res.encode(withHeaders).finish().length),
    measure(() => encodeRateLimitResponse(withHeaders).length),
  ],
];

console.log(`${OPS} ops × ${ROUNDS} rounds, median µs per op (node ${process.version})`);
console.log(`${'operation'.padEnd(52)} ${'protobufjs'.padStart(11)} ${'rls-codec'.padStart(10)} ${'speed-up'.padStart(9)}`);
for (const [name, theirs, ours] of rows)
  console.log(
    `${name.padEnd(52)} ${theirs.toFixed(3).padStart(11)} ${ours.toFixed(3).padStart(10)} ${`${(theirs / ours).toFixed(1)}×`.padStart(9)}`,
  );
if (sink === 0) console.log('');
