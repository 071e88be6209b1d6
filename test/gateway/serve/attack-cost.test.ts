// The cost attack suite: a client under a token budget tries to pay less than its answer cost — no usage asked for, a hang-up at
// every point of a stream, HEAD, Range, compressed and duplicated-usage answers — through a real gateway to a real LLM-like
// upstream on real sockets. Each row prints the units charged against the honest price; none may be charged below its bound.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { get } from '../../http/support/http.js';
import { parseMetrics, sleep, startGateway } from '../support/harness.js';

const TOKENS = 2000;
const ESTIMATE = 100;
const LIMIT = 100_000;
const event = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;

/** An OpenAI-like upstream: /chat streams 5 content events 30 ms apart and a usage event only when the request asks for one. */
async function startLlm(): Promise<{ url: string; server: Server }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const usage = { usage: { prompt_tokens: 10, total_tokens: TOKENS } };
    switch (url.pathname) {
      case '/v1/chat': {
        // OpenAI's shape: the request body says whether the stream reports its usage.
        let text = '';
        req.on('data', (chunk: Buffer) => (text += chunk.toString()));
        req.on('end', () => {
          const body = JSON.parse(text) as { stream_options?: { include_usage?: boolean } };
          res.writeHead(200, { 'content-type': 'text/event-stream', 'x-seen-body': text });
          res.write(event({ choices: [{ delta: { content: 'hi' } }], usage: null }));
          if (body.stream_options?.include_usage === true) res.write(event({ choices: [], ...usage }));
          res.end('data: [DONE]\n\n');
        });
        return;
      }
      case '/chat': {
        const include = url.searchParams.get('include_usage') === '1';
        const headDelay = Number(url.searchParams.get('head') ?? 0);
        const split = url.searchParams.get('split') === '1';
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          let i = 0;
          const next = (): void => {
            if (i < 5) {
              res.write(event({ choices: [{ delta: { content: `t${i}` } }], usage: null }));
              i += 1;
              setTimeout(next, 30);
              return;
            }
            if (!include) return void res.end('data: [DONE]\n\n');
            const text = event({ choices: [], ...usage });
            if (!split) return void res.end(`${text}data: [DONE]\n\n`);
            // The usage event in two writes, 120 ms apart: a client can leave in its middle.
            res.write(text.slice(0, 20));
            setTimeout(() => res.end(`${text.slice(20)}data: [DONE]\n\n`), 120);
          };
          next();
        }, headDelay);
        return;
      }
      case '/json': {
        const body =
          url.searchParams.get('dup') === '1' ? `{"usage":{"total_tokens":${TOKENS}},"usage":{"total_tokens":5}}` : JSON.stringify(usage);
        if (url.searchParams.get('gzip') === '1') {
          res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
          return void res.end(gzipSync(body));
        }
        // A naive range server: honours any Range it is sent (the gateway should send none).
        const range = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers.range ?? ''));
        if (range !== null) {
          res.writeHead(206, { 'content-type': 'application/json', 'content-range': `bytes ${range[1]}-${range[2]}/${body.length}` });
          return void res.end(body.slice(Number(range[1]), Number(range[2]) + 1));
        }
        if (url.searchParams.get('status') === '500') {
          res.writeHead(500, { 'content-type': 'application/json' });
          return void res.end('{"error":"failed"}');
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(body);
      }
      default:
        res.writeHead(404);
        res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/** How a client of the row behaves: plain (reads whole), or leaves at a point of the stream. */
type Leave = { after: 'send'; ms: number } | { after: 'head' } | { after: 'events'; n: number } | { after: 'partial-usage' };

interface Row {
  name: string;
  path: string;
  method?: string;
  headers?: Record<string, string>;
  leave?: Leave;
  /** What an honest client of this exchange pays. */
  honest: number;
  /** The least the stated bound allows: the honest price, or the estimate where the answer is not a 2xx. */
  bound: number;
}

const ROWS: readonly Row[] = [
  { name: 'honest stream (include_usage)', path: '/chat?include_usage=1', honest: TOKENS, bound: TOKENS },
  { name: 'F2: stream without include_usage', path: '/chat', honest: TOKENS, bound: TOKENS },
  {
    name: 'hang-up before the head',
    path: '/chat?include_usage=1&head=150',
    leave: { after: 'send', ms: 50 },
    honest: TOKENS,
    bound: TOKENS,
  },
  { name: 'hang-up after the head', path: '/chat?include_usage=1', leave: { after: 'head' }, honest: TOKENS, bound: TOKENS },
  ...[1, 2, 3, 4].map((n) => ({
    name: `hang-up after content event ${n}`,
    path: '/chat?include_usage=1',
    leave: { after: 'events', n } as Leave,
    honest: TOKENS,
    bound: TOKENS,
  })),
  {
    name: 'F3: hang-up after the last content event',
    path: '/chat?include_usage=1',
    leave: { after: 'events', n: 5 },
    honest: TOKENS,
    bound: TOKENS,
  },
  {
    name: 'hang-up mid usage event',
    path: '/chat?include_usage=1&split=1',
    leave: { after: 'partial-usage' },
    honest: TOKENS,
    bound: TOKENS,
  },
  { name: 'hang-up, no include_usage either', path: '/chat', leave: { after: 'events', n: 2 }, honest: TOKENS, bound: TOKENS },
  { name: 'JSON answer', path: '/json', honest: TOKENS, bound: TOKENS },
  { name: 'HEAD (no body: cost.missing)', path: '/json', method: 'HEAD', honest: TOKENS, bound: TOKENS },
  { name: 'Range: bytes=0-9 (skips the usage)', path: '/json', headers: { range: 'bytes=0-9' }, honest: TOKENS, bound: TOKENS },
  { name: 'Range + If-Range', path: '/json', headers: { range: 'bytes=30-40', 'if-range': '"x"' }, honest: TOKENS, bound: TOKENS },
  { name: 'gzip although identity was asked', path: '/json?gzip=1', headers: { 'accept-encoding': 'gzip' }, honest: TOKENS, bound: TOKENS },
  { name: 'duplicated usage: 2000 then 5', path: '/json?dup=1', honest: TOKENS, bound: TOKENS },
  { name: '500 without usage (estimate)', path: '/json?status=500', honest: ESTIMATE, bound: ESTIMATE },
];

/** Sends the row's request with its key and acts out its client; resolves once the client is done or gone. */
function play(url: string, row: Row, key: string): Promise<string> {
  return new Promise((resolve) => {
    const req = httpRequest(`${url}${row.path}`, {
      method: row.method ?? 'GET',
      headers: { 'x-api-key': key, ...row.headers },
      agent: false,
    });
    const leave = row.leave;
    const gone = (what: string): void => {
      req.destroy();
      resolve(what);
    };
    req.on('error', () => resolve('error'));
    req.on('response', (res) => {
      if (leave?.after === 'head') return gone(`${res.statusCode}, left`);
      let seen = '';
      res.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        const contents = (seen.match(/"content"/g) ?? []).length;
        if (leave?.after === 'events' && contents >= leave.n) gone(`${res.statusCode}, left`);
        if (leave?.after === 'partial-usage' && seen.includes('"choices":[],') && !seen.includes('total_tokens'))
          gone(`${res.statusCode}, left`);
      });
      res.on('end', () => resolve(String(res.statusCode)));
      res.on('error', () => resolve('cut'));
    });
    req.end();
    if (leave?.after === 'send') setTimeout(() => gone('left before head'), leave.ms);
  });
}

describe('attack: paying less than the answer cost (cost from the response)', () => {
  let llm: { url: string; server: Server };
  let gw: Gateway;
  before(async () => {
    llm = await startLlm();
    gw = await startGateway(`upstream: ${llm.url}
rules:
  - name: tokens
    key: header:x-api-key
    policies: [{ limit: ${LIMIT}, window: 1h }]
    cost: { estimate: ${ESTIMATE}, json: usage.total_tokens }
`);
  });
  after(async () => {
    await gw.shutdown();
    llm.server.closeAllConnections();
    await new Promise((resolve) => llm.server.close(resolve));
  });

  const charged = async (key: string): Promise<number> => {
    const limiter = (gw as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
    return limiter.peek(key).then((d) => d.limit - d.remaining);
  };

  it('no row is charged below its bound; the table shows what each cost', async () => {
    const table: Array<Record<string, string | number>> = [];
    await Promise.all(
      ROWS.map(async (row, i) => {
        const key = `row-${i}`;
        const seen = await play(gw.url, row, key);
        // Settled when the upstream exchange ends (drained after a hang-up): wait until the charge moves off the estimate, or 1.5 s.
        let units = await charged(key);
        for (let t = 0; t < 150 && units === ESTIMATE && row.bound !== ESTIMATE; t++) {
          await sleep(10);
          units = await charged(key);
        }
        await sleep(50);
        units = await charged(key);
        table.push({
          variant: row.name,
          client: seen,
          charged: units,
          honest: row.honest,
          bound: row.bound,
          ok: units >= row.bound ? 'yes' : 'NO',
        });
      }),
    );
    table.sort((a, b) => ROWS.findIndex((r) => r.name === a.variant) - ROWS.findIndex((r) => r.name === b.variant));
    console.log(`# cost attack suite (estimate ${ESTIMATE}, honest answer ${TOKENS}, cost.missing = limit ${LIMIT})`);
    console.table(table);
    for (const row of table)
      assert.ok(Number(row.charged) >= Number(row.bound), `${row.variant}: charged ${row.charged} < bound ${row.bound}`);
    const missing = parseMetrics((await get(`${gw.url}/_floodgate/metrics`)).body).get('floodgate_cost_missing_total{rule="tokens"}') ?? 0;
    assert.ok(missing >= 2, `floodgate_cost_missing_total counted ${missing}`);
  });
});

describe('F2/F3 regressions: a 10 000 tokens/min budget, 2 000 tokens an answer', () => {
  let llm: { url: string; server: Server };
  let gw: Gateway;
  before(async () => {
    llm = await startLlm();
    gw = await startGateway(`upstream: ${llm.url}
rules:
  - name: budget
    key: header:x-api-key
    policies: [{ limit: 10000, window: 1m }]
    cost: { estimate: 100, json: usage.total_tokens }
`);
  });
  after(async () => {
    await gw.shutdown();
    llm.server.closeAllConnections();
    await new Promise((resolve) => llm.server.close(resolve));
  });

  /** Answers served to one key before the first 429, at most `cap`. */
  async function servedBefore429(key: string, row: Row, cap = 30): Promise<number> {
    for (let n = 0; n < cap; n++) {
      const probe = await get(`${gw.url}/json?status=500`, { headers: { 'x-api-key': key } });
      if (probe.status === 429) return n;
      await play(gw.url, row, key);
      await sleep(20);
    }
    return cap;
  }

  it('F2: a streamed answer that reports no usage (no include_usage) is charged cost.missing, not the estimate', async () => {
    const honest = await servedBefore429('honest', ROWS[0]!);
    const hidden = await servedBefore429('no-usage', ROWS[1]!);
    console.log(`# answers before 429: honest ${honest}, without include_usage ${hidden}`);
    assert.ok(honest <= 6, `honest: ${honest}`);
    assert.ok(hidden <= honest, `without include_usage: ${hidden} answers, honest ${honest}`);
  });

  it('F3: a client that hangs up after the last content event, before the usage event, pays the usage (drained), not the estimate', async () => {
    const row = ROWS.find((r) => r.name.startsWith('F3'))!;
    const left = await servedBefore429('hang-up', row);
    console.log(`# answers before 429 hanging up before the usage event: ${left}`);
    assert.ok(left <= 6, `hang-ups: ${left} answers`);
  });
});

describe('cost.requestUsage: a streaming JSON request is made to ask for its usage', () => {
  let llm: { url: string; server: Server };
  let gw: Gateway;
  before(async () => {
    llm = await startLlm();
    gw = await startGateway(`upstream: ${llm.url}
rules:
  - name: asks
    key: header:x-api-key
    policies: [{ limit: ${LIMIT}, window: 1h }]
    cost: { estimate: ${ESTIMATE}, json: usage.total_tokens, requestUsage: true }
`);
  });
  after(async () => {
    await gw.shutdown();
    llm.server.closeAllConnections();
    await new Promise((resolve) => llm.server.close(resolve));
  });

  it('a request without include_usage is sent with it (other stream_options kept) and pays the usage, not cost.missing', async () => {
    const post = (body: string): Promise<{ status: number; seen: string }> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(
          `${gw.url}/v1/chat`,
          {
            method: 'POST',
            headers: { 'x-api-key': 'asker', 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, seen: String(res.headers['x-seen-body']) }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const reply = await post('{"model":"m","stream":true,"stream_options":{"x":1}}');
    assert.equal(reply.status, 200);
    assert.deepEqual(JSON.parse(reply.seen), { model: 'm', stream: true, stream_options: { x: 1, include_usage: true } });
    const limiter = (gw as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
    for (let t = 0; t < 100 && (await limiter.peek('asker')).remaining === LIMIT - ESTIMATE; t++) await sleep(10);
    assert.equal(LIMIT - (await limiter.peek('asker')).remaining, TOKENS);
    // A request that does not stream is left as it is.
    const plain = await post('{"model":"m"}');
    assert.equal(plain.seen, '{"model":"m"}');
  });
});
