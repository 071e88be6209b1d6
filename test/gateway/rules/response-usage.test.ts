// Reading a response's cost as it streams past: a header, the JSON body's field, the last usage event of an SSE stream; bounded memory
// for huge bodies and never-ending lines; values that are not whole numbers ≥ 0 are refused (charged the estimate) with a warning.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UsageSource } from '../../../src/gateway/config/settings.js';
import { MAX_JSON_BYTES, MAX_SSE_LINE_BYTES, UsageReader } from '../../../src/gateway/rules/response-usage.js';
import { WarningCode, type WarningCodeValue } from '../../../src/core/warnings.js';

const TOTAL: UsageSource = { kind: 'json', path: ['usage', 'total_tokens'] };

/** Feeds `body` to a reader in chunks of `size` bytes and returns the usage and the warnings. */
function read(source: UsageSource, headers: Record<string, string>, body: string | Buffer, size = 7, status = 200) {
  const warnings: Array<{ code: WarningCodeValue; message: string }> = [];
  const reader = new UsageReader(source, 'llm', (code, message) => warnings.push({ code, message }));
  reader.head(status, headers);
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  for (let i = 0; i < bytes.length; i += size) reader.data(bytes.subarray(i, i + size));
  const usage = reader.usage();
  return { usage, warnings, missing: reader.missingReason() };
}

const sse = (events: string[]): string => events.map((e) => `data: ${e}\n\n`).join('');

describe('UsageReader', () => {
  it('reads a whole number from a response header, and nothing from the body', () => {
    const source: UsageSource = { kind: 'header', header: 'x-usage-tokens' };
    assert.equal(read(source, { 'x-usage-tokens': '1234' }, '{"usage":{"total_tokens":5}}').usage, 1234);
    assert.equal(read(source, {}, '').usage, undefined);
  });

  it('reads the JSON body field at the dotted path, across chunk boundaries', () => {
    const body = JSON.stringify({ id: 'x', choices: [{ text: 'héllo wörld' }], usage: { prompt_tokens: 3, total_tokens: 42 } });
    for (const size of [1, 3, 64, 10_000]) assert.equal(read(TOTAL, { 'content-type': 'application/json' }, body, size).usage, 42);
    assert.equal(read(TOTAL, { 'content-type': 'application/json' }, '{"usage":{}}').usage, undefined);
    assert.equal(read(TOTAL, { 'content-type': 'application/json' }, 'not json').usage, undefined);
    // Not JSON by its type: the body is not kept at all.
    assert.equal(read(TOTAL, { 'content-type': 'text/plain' }, body).usage, undefined);
  });

  it('keeps the last usage of an SSE stream, whatever the line endings and chunking', () => {
    const events = [
      '{"choices":[{"delta":{"content":"a"}}],"usage":null}',
      '{"choices":[{"delta":{"content":"b"}}],"usage":{"total_tokens":7}}',
      '{"choices":[],"usage":{"prompt_tokens":9,"total_tokens":77}}',
      '[DONE]',
    ];
    const lf = `: comment\nevent: message\n${sse(events)}`;
    for (const size of [1, 2, 5, 100, 100_000]) {
      assert.equal(read(TOTAL, { 'content-type': 'text/event-stream; charset=utf-8' }, lf, size).usage, 77);
      assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, lf.replace(/\n/g, '\r\n'), size).usage, 77);
      // A lone CR ends a line too: a CR-ended stream is not one over-long line.
      assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, lf.replace(/\n/g, '\r'), size).usage, 77);
    }
    // A CRLF split across chunks is one line end, not an empty line that would end the event between its data lines.
    const split = 'data: {"usage":\r\ndata: {"total_tokens":6}}\r\n\r\n';
    for (let size = 1; size <= split.length; size++)
      assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, split, size).usage, 6);
    // The last event without its closing blank line still counts when the stream ends.
    assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, 'data: {"usage":{"total_tokens":5}}').usage, 5);
    // A path ending in an array index.
    const indexed: UsageSource = { kind: 'json', path: ['usage', 'counts', '1'] };
    assert.equal(read(indexed, { 'content-type': 'text/event-stream' }, sse(['{"usage":{"counts":[3,9]}}'])).usage, 9);
    assert.equal(read({ kind: 'json', path: ['0'] }, { 'content-type': 'text/event-stream' }, sse(['[4]'])).usage, 4);
    // One event's data over several data lines is joined with newlines, as EventSource does.
    assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, 'data: {"usage":\ndata: {"total_tokens":6}}\n\n').usage, 6);
  });

  it('a usage field that is negative, fractional, NaN-like, huge or a string: the estimate, and one warning naming the value', () => {
    for (const bad of ['-5', '2.5', '"12"', '1e400', '9007199254740993', 'true', '[1]', '{"n":1}']) {
      const { usage, warnings } = read(TOTAL, { 'content-type': 'application/json' }, `{"usage":{"total_tokens":${bad}}}`);
      assert.equal(usage, undefined, bad);
      assert.equal(warnings.length, 1, bad);
      assert.equal(warnings[0]!.code, WarningCode.COST_USAGE_INVALID);
      assert.match(
        warnings[0]!.message,
        /^rule "llm": the upstream reported a cost that is not a whole number ≥ 0 in its field usage.total_tokens/,
      );
    }
    const header: UsageSource = { kind: 'header', header: 'x-usage-tokens' };
    for (const bad of ['-1', '1.5', 'NaN', 'Infinity', '0x10', '1e3', '12 tokens', '99999999999999999999']) {
      const { usage, warnings } = read(header, { 'x-usage-tokens': bad }, '');
      assert.equal(usage, undefined, bad);
      assert.equal(warnings[0]?.code, WarningCode.COST_USAGE_INVALID, bad);
    }
    assert.equal(read(header, { 'x-usage-tokens': '0' }, '').usage, 0);
  });

  it('a path into the prototype finds nothing: "constructor" is not a usage', () => {
    const source: UsageSource = { kind: 'json', path: ['constructor'] };
    const { usage, warnings, missing } = read(source, { 'content-type': 'application/json' }, '{"a":1}');
    assert.equal(usage, undefined);
    assert.equal(warnings.length, 0);
    assert.equal(missing, 'no constructor field in its JSON body');
  });

  it('a successful response without a usage is missing (cost.missing), saying where the rule looked, a 2xx answer to HEAD included; errors and 204 keep the estimate', () => {
    const json = { 'content-type': 'application/json' };
    const missing = read(TOTAL, json, '{"usage":{"prompt_tokens":3}}');
    assert.equal(missing.usage, undefined);
    assert.equal(missing.missing, 'no usage.total_tokens field in its JSON body');
    const stream = read(TOTAL, { 'content-type': 'text/event-stream' }, sse(['{"choices":[]}', '[DONE]']));
    assert.equal(stream.missing, 'no usage.total_tokens field in its event stream');
    assert.equal(read({ kind: 'header', header: 'x-usage-tokens' }, {}, 'ok').missing, 'no x-usage-tokens header');
    assert.equal(read(TOTAL, { 'content-type': 'text/html' }, '<p>').missing, 'a body that is neither JSON nor an event stream');
    assert.equal(read(TOTAL, json, '{"error":"bad"}', 7, 429).missing, undefined);
    assert.equal(read(TOTAL, json, '', 7, 204).missing, undefined);
    // An answer to HEAD has no body, but the upstream may have run its GET handler (Express and node:http do): fail closed.
    const reader = new UsageReader(TOTAL, 'llm', () => undefined);
    reader.head(200, json, true);
    assert.equal(reader.usage(), undefined);
    assert.equal(reader.missingReason(), 'an answer to HEAD, which has no body to report the usage in');
    // Cut short: the head came, the body never ended whole.
    const cut = new UsageReader(TOTAL, 'llm', () => undefined);
    cut.head(200, { 'content-type': 'text/event-stream' });
    cut.data(Buffer.from('data: {"choices":[]}\n\n'));
    assert.equal(cut.missingReason(), 'a body cut short before its usage was read');
  });

  it('duplicated usage fields: the larger wins, in a JSON body and across the events of a stream', () => {
    const json = { 'content-type': 'application/json' };
    assert.equal(read(TOTAL, json, '{"usage":{"total_tokens":2000},"usage":{"total_tokens":5}}').usage, 2000);
    assert.equal(read(TOTAL, json, '{"usage":{"total_tokens":5},"usage":{"total_tokens":2000}}').usage, 2000);
    assert.equal(read(TOTAL, json, '{"usage":{"total_tokens":5,"total_tokens":7}}').usage, 7);
    assert.equal(read(TOTAL, json, '{"usage":{"total_tokens":9},"usage":null}').usage, 9);
    const events = sse(['{"usage":{"total_tokens":900}}', '{"usage":{"total_tokens":3}}', '[DONE]']);
    assert.equal(read(TOTAL, { 'content-type': 'text/event-stream' }, events).usage, 900);
  });

  it('a partial body (206) is missing: the client chose which part it got', () => {
    const partial = read(TOTAL, { 'content-type': 'application/json' }, '{"usage":{"total_tokens":1}}', 7, 206);
    assert.equal(partial.usage, undefined);
    assert.match(String(partial.missing), /partial body \(206\)/);
  });

  it('a JSON body over the cap is not kept: the estimate, and a warning', () => {
    const big = `{"pad":"${'x'.repeat(MAX_JSON_BYTES)}","usage":{"total_tokens":3}}`;
    const { usage, warnings } = read(TOTAL, { 'content-type': 'application/json' }, big, 65536);
    assert.equal(usage, undefined);
    assert.equal(warnings[0]?.code, WarningCode.COST_RESPONSE_TOO_LARGE);
  });

  it('an SSE line (or event) longer than the cap is skipped to its end; the usage after it still counts, in bounded memory', () => {
    const reader = new UsageReader(TOTAL, 'llm', () => undefined);
    reader.head(200, { 'content-type': 'text/event-stream' });
    const before = process.memoryUsage().arrayBuffers;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    reader.data(Buffer.from('data: '));
    // 64 MiB of one line that never ends: the reader keeps none of it.
    for (let i = 0; i < 1024; i++) reader.data(chunk);
    const grown = process.memoryUsage().arrayBuffers - before;
    assert.ok(grown < 8 * MAX_SSE_LINE_BYTES + 4 * 1024 * 1024, `kept ${grown} bytes`);
    reader.data(Buffer.from('\n\ndata: {"usage":{"total_tokens":8}}\n\n'));
    assert.equal(reader.usage(), 8);
    // Many short data lines in one event are capped too.
    const many = `${'data: 0123456789\n'.repeat(Math.ceil(MAX_SSE_LINE_BYTES / 10) + 10)}\n`;
    const { usage, warnings } = read(TOTAL, { 'content-type': 'text/event-stream' }, `${many}data: {"usage":{"total_tokens":4}}\n\n`, 4096);
    assert.equal(usage, 4);
    assert.equal(warnings[0]?.code, WarningCode.COST_RESPONSE_TOO_LARGE);
  });

  it('a gzip- or br-encoded body is not decoded: missing (cost.missing), and a warning saying to report the cost in a header', () => {
    for (const encoding of ['gzip', 'br']) {
      const { usage, warnings } = read(
        TOTAL,
        { 'content-type': 'application/json', 'content-encoding': encoding },
        '{"usage":{"total_tokens":1}}',
      );
      assert.equal(usage, undefined);
      assert.equal(warnings[0]?.code, WarningCode.COST_RESPONSE_ENCODED);
      assert.match(
        warnings[0]!.message,
        new RegExp(`sent it ${encoding}-encoded although the gateway asked for identity, and it is not decoded`),
      );
    }
  });
});
