// Test helpers for the HTTP adapters: real requests with node:http, stub stores, and checks of the rate-limit header syntax.
import assert from 'node:assert/strict';
import { request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, FloodgateError } from '../../../src/core/errors.js';
import type { Operation, Outcome } from '../../../src/core/policy.js';
import type { Store } from '../../../src/stores/store.js';
import { parseDictionary, parseInteger, parseList, type Item } from './sf.js';

/** Sends a request (with `headers`) whose client hangs up after `ms`; resolves when it has. */
export function leaveAfter(url: string, ms: number, headers: Record<string, string> = {}): Promise<void> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { headers, agent: false });
    req.on('error', () => resolve());
    req.end();
    setTimeout(() => {
      req.destroy();
      resolve();
    }, ms);
  });
}

/** A response as the tests see it. */
export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Milliseconds from sending to the end of the body. */
  elapsedMs: number;
}

/** Options of {@link get}. */
export interface GetOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Give up (and fail the test) after this long; default 5 s. */
  timeoutMs?: number;
}

/** Sends one real HTTP request on a fresh connection and reads the whole response. */
export function get(url: string, options: GetOptions = {}): Promise<Reply> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          elapsedMs: Date.now() - started,
        }),
      );
      res.on('error', reject);
    });
    req.setTimeout(options.timeoutMs ?? 5000, () => req.destroy(new Error(`request to ${url} hung for ${options.timeoutMs ?? 5000} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** Sends `n` requests one after another and returns the statuses. */
export async function statuses(url: string, n: number, options: GetOptions = {}): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) out.push((await get(url, options)).status);
  return out;
}

/** Listens on an ephemeral port and returns the base URL. */
export function listen(server: Server, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      resolve(`http://127.0.0.1:${port}`);
    });
  });
}

/** Closes a server and any connection still open. */
export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A store whose every call rejects, as a failed Redis would. */
export class FailingStore implements Store {
  readonly name = 'failing';
  calls = 0;
  apply(_operation: Operation): Promise<Outcome> {
    this.calls += 1;
    return Promise.reject(new FloodgateError(ErrorCode.STORE_ERROR, 'failing store failed: connection refused'));
  }
}

/** A store that never answers, as a Redis that accepts the connection and then stalls. */
export class HangingStore implements Store {
  readonly name = 'hanging';
  apply(_operation: Operation): Promise<Outcome> {
    return new Promise(() => undefined);
  }
}

/** One policy as read back from the IETF fields. */
export interface IetfPolicy {
  name: string;
  q: number;
  w: number | undefined;
  r: number;
  t: number | undefined;
}

/**
 * Parses RateLimit-Policy and RateLimit as the current draft defines them
 * (Lists of Items whose value is a String, with Integer parameters q, w, r,
 * t), asserts the syntax and that both fields name the same policies, and
 * returns them by name.
 */
export function readIetf(headers: IncomingHttpHeaders): Map<string, IetfPolicy> {
  const policyField = headers['ratelimit-policy'];
  const limitField = headers['ratelimit'];
  assert.equal(typeof policyField, 'string', 'RateLimit-Policy present');
  assert.equal(typeof limitField, 'string', 'RateLimit present');
  const policies = parseList(policyField as string);
  const limits = parseList(limitField as string);
  assert.ok(policies.length > 0, 'RateLimit-Policy is a non-empty list');
  const out = new Map<string, IetfPolicy>();
  for (const item of policies) {
    const name = stringValue(item);
    const q = integerParam(item, 'q', true)!;
    assert.ok(q >= 0, 'q is non-negative');
    const w = integerParam(item, 'w', false);
    if (w !== undefined) assert.ok(w > 0, 'w is a positive integer');
    assert.ok(!out.has(name), `policy ${name} listed once`);
    out.set(name, { name, q, w, r: -1, t: undefined });
  }
  for (const item of limits) {
    const name = stringValue(item);
    const policy = out.get(name);
    assert.ok(policy, `RateLimit item ${name} has a RateLimit-Policy item`);
    const r = integerParam(item, 'r', true)!;
    assert.ok(r >= 0, 'r is non-negative');
    const t = integerParam(item, 't', false);
    if (t !== undefined) assert.ok(t >= 0, 't is non-negative');
    policy.r = r;
    policy.t = t;
  }
  for (const p of out.values()) assert.ok(p.r >= 0, `policy ${p.name} has a RateLimit item`);
  return out;
}

/** Parses draft-7 `RateLimit: limit=…, remaining=…, reset=…` and `RateLimit-Policy: 10;w=1, …`. */
export function readDraft7(headers: IncomingHttpHeaders): {
  limit: number;
  remaining: number;
  reset: number;
  policies: Array<{ q: number; w: number | undefined }>;
} {
  const dict = parseDictionary(headers['ratelimit'] as string);
  assert.deepEqual([...dict.keys()].sort(), ['limit', 'remaining', 'reset']);
  const num = (k: string): number => {
    const v = dict.get(k)!.value;
    assert.ok(typeof v === 'number' && Number.isInteger(v) && v >= 0, `${k} is a non-negative Integer`);
    return v;
  };
  return { limit: num('limit'), remaining: num('remaining'), reset: num('reset'), policies: readDraftPolicy(headers) };
}

/** Parses draft-6 RateLimit-Limit / -Remaining / -Reset and RateLimit-Policy. */
export function readDraft6(headers: IncomingHttpHeaders): {
  limit: number;
  remaining: number;
  reset: number;
  policies: Array<{ q: number; w: number | undefined }>;
} {
  return {
    limit: parseInteger(headers['ratelimit-limit'] as string),
    remaining: parseInteger(headers['ratelimit-remaining'] as string),
    reset: parseInteger(headers['ratelimit-reset'] as string),
    policies: readDraftPolicy(headers),
  };
}

function readDraftPolicy(headers: IncomingHttpHeaders): Array<{ q: number; w: number | undefined }> {
  return parseList(headers['ratelimit-policy'] as string).map((item) => {
    assert.ok(typeof item.value === 'number' && Number.isInteger(item.value), 'draft policy item is an Integer');
    return { q: item.value, w: integerParam(item, 'w', false) };
  });
}

function stringValue(item: Item): string {
  assert.equal(typeof item.value, 'string', 'item value is a String');
  return item.value as string;
}

function integerParam(item: Item, key: string, required: boolean): number | undefined {
  const v = item.params.get(key);
  if (v === undefined) {
    assert.ok(!required, `parameter ${key} is required`);
    return undefined;
  }
  assert.ok(typeof v === 'number' && Number.isInteger(v), `parameter ${key} is an Integer`);
  return v;
}
