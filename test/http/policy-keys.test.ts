// Per-policy keys without a server: the option's checks and their messages, bad key answers, missing key headers, and the refund rule under each policy's own key.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { RateLimiter } from '../../src/limiter/rate-limiter.js';
import { MemoryStore } from '../../src/stores/memory.js';
import { HttpLimiter } from '../../src/http/http-limiter.js';
import type { Operation, Outcome } from '../../src/core/policy.js';
import type { Store } from '../../src/stores/store.js';
import type { HttpOutcome, HttpRateLimitOptions, RequestView } from '../../src/http/types.js';

const adapter = { owner: 'test', frameworkIp: false };
const build = (options: Partial<HttpRateLimitOptions<unknown>>): HttpLimiter<unknown> =>
  new HttpLimiter<unknown>(options as HttpRateLimitOptions<unknown>, adapter);
const view = (headers: Record<string, string> = {}): RequestView<unknown> => ({
  raw: {},
  socketAddress: '192.0.2.1',
  headers,
  method: 'GET',
  path: '/',
});
const three = (store = new MemoryStore({ sweepIntervalMs: 0 })) => ({
  store,
  user: new RateLimiter({ limit: 3, window: '1m', prefix: 'user', store }),
  org: new RateLimiter({ limit: 4, window: '1m', prefix: 'org', store }),
  all: new RateLimiter({ limit: 100, window: '1m', prefix: 'all', store }),
});

describe('a policy key option', () => {
  it('a key that is not "ip", { header } or a function: INVALID_OPTIONS naming the policy and the forms', () => {
    const { user } = three();
    const cases: Array<[unknown, string, RegExp]> = [
      [
        'org',
        ErrorCode.INVALID_OPTIONS,
        /^the key of policy "p" must be "ip", \{ header: "x-api-key" \} or a function \(req, client\) => string; got "org"\.$/,
      ],
      [42, ErrorCode.INVALID_OPTIONS, /^the key of policy "p" must be "ip"/],
      [null, ErrorCode.INVALID_OPTIONS, /is null; leave it out/],
      [{ header: 'bad header' }, ErrorCode.INVALID_OPTIONS, /^the key of policy "p"\.header must be a header name/],
      [{ header: 'x-org', missingStatus: 403 }, ErrorCode.INVALID_OPTIONS, /^the key of policy "p"\.missingStatus must be 400 or 401/],
      [{ heder: 'x-org' }, ErrorCode.UNKNOWN_OPTION, /the key of policy "p" has no option "heder"/],
    ];
    for (const [key, code, message] of cases) {
      assert.throws(() => build({ limiter: [{ limiter: user, name: 'p', key } as never] }), { code, message }, String(key));
    }
  });

  it('a key function answering something else than a non-empty string: an INVALID_KEY error to the framework, nothing spent', async () => {
    const { user, org } = three();
    const limiter = build({ key: () => 'ana', limiter: [{ limiter: user }, { limiter: org, key: () => '' }] });
    const outcome = await limiter.handle(view());
    assert.equal(outcome.action, 'error');
    assert.equal((outcome as { error: { code: string } }).error.code, ErrorCode.INVALID_KEY);
    assert.equal((await user.peek('ana')).remaining, 3);
    const later = build({ key: () => 'ana', limiter: [{ limiter: user }, { limiter: org, key: async () => 7 as never }] });
    const rejected = await later.handle(view());
    assert.equal((rejected as { error: { code: string } }).error.code, ErrorCode.INVALID_KEY);
  });

  it('a long key function answer is hashed as the route key is', async () => {
    const { user, org } = three();
    const long = 'o'.repeat(500);
    const limiter = build({
      key: () => 'ana',
      maxKeyLength: 64,
      limiter: [{ limiter: user }, { limiter: org, key: () => long, name: 'org' }],
    });
    const outcome = (await limiter.handle(view())) as Extract<HttpOutcome, { action: 'continue' }>;
    const orgKey = outcome.info!.policies.find((p) => p.name === 'org')!.key!;
    assert.ok(orgKey.length <= 64 && orgKey !== long, orgKey);
    assert.equal((await org.peek(orgKey)).remaining, 3);
  });

  it('a policy keyed by a header the request lacks: 401 with WWW-Authenticate, before any counting', async () => {
    const { user, org } = three();
    const limiter = build({ key: () => 'ana', limiter: [{ limiter: user }, { limiter: org, key: { header: 'X-Org' } }] });
    const outcome = limiter.decide(view()) as Extract<HttpOutcome, { action: 'respond' }>;
    assert.equal(outcome.status, 401);
    assert.deepEqual(outcome.headers, [['WWW-Authenticate', 'ApiKey header="x-org"']]);
    assert.equal((await user.peek('ana')).remaining, 3);
    const admitted = (await limiter.handle(view({ 'x-org': 'acme' }))) as Extract<HttpOutcome, { action: 'continue' }>;
    assert.deepEqual(
      admitted.info!.policies.map((p) => [p.name, p.key, p.remaining]),
      [
        ['3-per-1m', undefined, 2],
        ['4-per-1m', 'acme', 3],
      ],
    );
  });

  it('"ip" as a policy key counts the client address beside the route key', async () => {
    const { user, org } = three();
    const limiter = build({ key: () => 'ana', limiter: [{ limiter: user }, { limiter: org, key: 'ip', name: 'address' }] });
    await limiter.handle(view());
    assert.equal((await org.peek('192.0.2.1')).remaining, 3);
    assert.equal((await user.peek('ana')).remaining, 2);
  });

  it('a lone policy with its own key takes the synchronous path under that key', async () => {
    const { org } = three();
    const limiter = build({ key: () => 'ana', limiter: [{ limiter: org, key: () => 'acme' }] });
    const outcome = limiter.decide(view());
    assert.equal((outcome as HttpOutcome).action, 'continue');
    assert.equal((await org.peek('acme')).remaining, 3);
    assert.equal((await org.peek('ana')).remaining, 4);
  });

  it('policies on different stores: a refusal gives back what the others took, each under its own key', async () => {
    const a = three();
    const b = three();
    const limiter = build({
      key: () => 'ana',
      validate: false,
      limiter: [{ limiter: a.user }, { limiter: b.org, key: () => 'acme', name: 'org' }, { limiter: a.all, key: () => 'all' }],
    });
    for (let i = 0; i < 2; i += 1) assert.equal((await limiter.handle(view())).action, 'continue');
    await b.org.consume('acme', 2);
    const refused = (await limiter.handle(view())) as Extract<HttpOutcome, { action: 'respond' }>;
    assert.equal(refused.status, 429);
    assert.match(refused.body, /"violated-policies":\["org"\]/);
    // Only the org refused: the user's and everyone's units of the refused request came back.
    assert.equal((await a.user.peek('ana')).remaining, 1);
    assert.equal((await a.all.peek('all')).remaining, 98);
    assert.equal((await b.org.peek('acme')).remaining, 0);
  });

  it('a composite admitted after the middleware timed out gives each policy its units back under its own key', async () => {
    const memory = new MemoryStore({ sweepIntervalMs: 0 });
    const later = <T>(value: () => T): Promise<T> => new Promise((resolve) => setTimeout(() => resolve(value()), 150));
    const slow: Store = {
      name: 'slow',
      apply: (op: Operation): Promise<Outcome> => later(() => memory.applyNow(op)!),
      consumeAll: (ops: readonly Operation[]): Promise<Outcome[]> => later(() => memory.consumeAllSync(ops, Date.now())),
    };
    const user = new RateLimiter({ limit: 3, window: '1m', prefix: 'user', store: slow, breaker: false });
    const org = new RateLimiter({ limit: 4, window: '1m', prefix: 'org', store: slow, breaker: false });
    const limiter = build({
      key: () => 'ana',
      timeout: 30,
      onError: () => undefined,
      limiter: [{ limiter: user }, { limiter: org, key: () => 'acme' }],
    });
    const outcome = (await limiter.handle(view())) as Extract<HttpOutcome, { action: 'respond' }>;
    assert.equal(outcome.status, 503);
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(memory.applyNow({ kind: 'peek', key: 'user:ana', amount: 0, policy: user.policy })!.remaining, 3);
    assert.equal(memory.applyNow({ kind: 'peek', key: 'org:acme', amount: 0, policy: org.policy })!.remaining, 4);
  });
});
