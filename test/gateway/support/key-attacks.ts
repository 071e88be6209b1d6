// Table-driven attacks on a rule's key source: each row sends its requests as raw bytes to a real gateway and asserts every status.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { requestBytes, sendRaw } from './raw.js';

/** One request of a row: its target and header lines exactly as sent. */
export interface AttackRequest {
  /** The request target, e.g. `/x?k=a`. */
  readonly target: string;
  /** Header lines (`Name: value`), sent in this order, duplicates and all. */
  readonly headers?: readonly string[];
  /** The method; default GET. */
  readonly method?: string;
}

/** One row of an attack table: what the client tries, what it sends, and what the gateway answers each request. */
export interface AttackRow {
  /** What the client tries, as the test's name. */
  readonly attempt: string;
  /** The requests, sent one after another on fresh connections. */
  readonly requests: readonly AttackRequest[];
  /** The status of each answer. */
  readonly expect: readonly number[];
}

/** The status of one raw request to the gateway. */
export async function statusOf(g: Gateway, request: AttackRequest): Promise<number> {
  const line = `${request.method ?? 'GET'} ${request.target} HTTP/1.1`;
  const reply = await sendRaw(g.url, requestBytes(line, request.headers ?? []));
  return reply.statuses[0] ?? 0;
}

/**
 * One test per row, each against the gateway `gateway()` returns (started
 * in a `before` hook). Rows must not share key values: every row's counts
 * start from nothing because its values are its own.
 */
export function attackTable(rows: readonly AttackRow[], gateway: () => Gateway): void {
  for (const row of rows) {
    it(`${row.attempt} → ${row.expect.join(', ')}`, async () => {
      const got: number[] = [];
      for (const request of row.requests) got.push(await statusOf(gateway(), request));
      assert.deepEqual(got, [...row.expect], row.attempt);
    });
  }
}
