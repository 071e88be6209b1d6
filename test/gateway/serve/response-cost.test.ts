// Rules whose requests cost what the upstream's response reports: the estimate is taken before forwarding and settled when the response
// ends, from a header, the JSON body or the last usage event of a streamed (SSE) response, through a real gateway to a real upstream.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import type { RuleSet } from '../../../src/gateway/rules/rule-set.js';
import { forgetWarnings, WarningCode } from '../../../src/core/warnings.js';
import { get } from '../../http/support/http.js';
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { rejectsConfig } from '../support/config-errors.js';
import { parseMetrics, sleep, startGateway, untilReady } from '../support/harness.js';

/** The test upstream: an LLM-like API that reports its token usage in a header, a JSON body or the last event of an SSE stream. */
interface Llm {
  url: string;
  server: Server;
  /** Request headers seen, by path. */
  seen: Array<{ path: string; headers: IncomingMessage['headers'] }>;
  /** Responses the upstream saw cut before their end. */
  cut: number;
  /** Tokens the upstream reported, per completed response. */
  reported: number[];
}

const sseEvent = (data: unknown): string => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

async function startLlm(): Promise<Llm> {
  const llm: Llm = { url: '', server: undefined as unknown as Server, seen: [], cut: 0, reported: [] };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    llm.seen.push({ path: url.pathname, headers: req.headers });
    const tokens = Number(url.searchParams.get('tokens') ?? 0);
    const raw = url.searchParams.get('raw');
    res.on('close', () => {
      if (!res.writableFinished) llm.cut += 1;
    });
    switch (url.pathname) {
      case '/header':
        res.writeHead(200, { 'content-type': 'text/plain', 'x-usage-tokens': raw ?? String(tokens) });
        res.end('done');
        llm.reported.push(tokens);
        return;
      case '/json':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(raw === null ? JSON.stringify({ text: 'hi', usage: { total_tokens: tokens } }) : `{"usage":{"total_tokens":${raw}}}`);
        llm.reported.push(tokens);
        return;
      case '/echo':
        // A naive upstream that copies request headers into its answer.
        res.writeHead(200, {
          'content-type': 'text/plain',
          ...(req.headers['x-usage-tokens'] ? { 'x-usage-tokens': req.headers['x-usage-tokens'] } : {}),
        });
        res.end('echo');
        return;
      case '/sse': {
        const events = Number(url.searchParams.get('events') ?? 3);
        const gap = Number(url.searchParams.get('gap') ?? 5);
        const line = Number(url.searchParams.get('line') ?? 0);
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        let i = 0;
        const next = (): void => {
          if (res.destroyed) return;
          if (i < events) {
            res.write(sseEvent({ choices: [{ delta: { content: `tok${i}` } }], usage: null }));
            i += 1;
            setTimeout(next, gap);
            return;
          }
          if (line > 0) res.write(`data: ${'x'.repeat(line)}\n\n`);
          res.write(sseEvent({ choices: [], usage: { prompt_tokens: 1, total_tokens: tokens } }));
          res.end(sseEvent('[DONE]'));
          llm.reported.push(tokens);
        };
        next();
        return;
      }
      case '/die': {
        // Reports a usage, then fails before the end of its body.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(sseEvent({ usage: { total_tokens: tokens } }));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      case '/forever': {
        // Streams without end and without usage, until the client goes away.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const timer = setInterval(() => res.write(sseEvent({ choices: [{ delta: { content: 'more' } }] })), 5);
        res.on('close', () => clearInterval(timer));
        return;
      }
      default:
        res.writeHead(404);
        res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  llm.server = server;
  llm.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return llm;
}

function config(upstream: string, cost: string, policy = '{ limit: 1000, window: 1m }'): string {
  return `upstream: ${upstream}
rules:
  - name: llm
    key: global
    policies: [${policy}]
    cost: ${cost}
`;
}

/** The rule's policy limiter, read directly: how many units its key holds now. */
function used(gateway: Gateway): Promise<number> {
  const limiter = (gateway as unknown as { rules: RuleSet }).rules.rules[0]!.limiters[0]!;
  return limiter.peek('global').then((d) => d.limit - d.remaining);
}

/** Waits until the key holds `expected` units (settlement runs when the response closes, a moment after the client read it). */
async function settlesAt(gateway: Gateway, expected: number): Promise<void> {
  let now = -1;
  for (let i = 0; i < 100; i++) {
    now = await used(gateway);
    if (now === expected) {
      // ... and stays there: exactly one settlement.
      await sleep(50);
      assert.equal(await used(gateway), expected, 'settled once');
      return;
    }
    await sleep(10);
  }
  assert.fail(`the key holds ${now} units, expected ${expected}`);
}

describe('gateway: cost from the upstream response', () => {
  let llm: Llm;
  const gateways: Gateway[] = [];
  const start = async (yaml: string): Promise<Gateway> => {
    const g = await startGateway(yaml);
    gateways.push(g);
    return g;
  };
  before(async () => {
    llm = await startLlm();
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    llm.server.closeAllConnections();
    await new Promise((resolve) => llm.server.close(resolve));
  });

  it('a response header: the estimate is taken before forwarding, the reported cost replaces it when the response ends', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, header: x-usage-tokens }'));
    const reply = await get(`${gw.url}/header?tokens=30`);
    assert.equal(reply.status, 200);
    // The admission's RateLimit fields show the estimate taken.
    assert.match(String(reply.headers['ratelimit']), /r=900/);
    await settlesAt(gw, 30);
    await get(`${gw.url}/header?tokens=250`);
    await settlesAt(gw, 280);
  });

  it('the JSON body field at the dotted path', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens }'));
    const reply = await get(`${gw.url}/json?tokens=42`);
    assert.equal(JSON.parse(reply.body).usage.total_tokens, 42, 'the body reaches the client whole');
    await settlesAt(gw, 42);
  });

  it('a streamed SSE response whose usage arrives in its last event, over and under the estimate', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens }'));
    const reply = await get(`${gw.url}/sse?tokens=250&events=5&gap=10`);
    assert.match(reply.body, /tok0[\s\S]*tok4[\s\S]*"total_tokens":250[\s\S]*\[DONE\]/);
    await settlesAt(gw, 250);
    await get(`${gw.url}/sse?tokens=7&events=2`);
    await settlesAt(gw, 257);
  });

  it('every policy of the rule settles, each under its own key; each rule with cost settles its own estimate; others count requests', async () => {
    const gw = await start(`upstream: ${llm.url}
rules:
  - name: llm
    key: global
    policies: [{ limit: 1000, window: 1m }, { name: per-address, limit: 5000, window: 1m, key: ip }]
    cost: { estimate: 100, header: x-usage-tokens }
  - name: requests
    key: ip
    policies: [{ name: calls, limit: 50, window: 1m }]
  - name: tokens-per-address
    key: ip
    policies: [{ name: address-tokens, limit: 20000, window: 1m }]
    cost: { estimate: 5, header: x-usage-tokens }
`);
    await get(`${gw.url}/header?tokens=30`);
    await settlesAt(gw, 30);
    const reply = await get(`${gw.url}/header?tokens=0`);
    // The second request's admission: the estimate on top of the first one's 30, in both policies; one call of 50 per request.
    const ratelimit = String(reply.headers['ratelimit']);
    assert.match(ratelimit, /"1000-per-1m";r=870/);
    assert.match(ratelimit, /"per-address";r=4870/);
    assert.match(ratelimit, /"calls";r=48/);
    // A second rule with cost settles its own estimate (5) from the same response.
    assert.match(ratelimit, /"address-tokens";r=19965/);
    await settlesAt(gw, 30);
  });

  it('a give-back whose window has ended is dropped: it must not add units to a window that never held the estimate', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens }', '{ limit: 1000, window: 1s }'));
    // A: admitted in the first window, streams past its end (1.5 s), reports 10.
    const slow = get(`${gw.url}/sse?tokens=10&events=6&gap=250`);
    await sleep(1100);
    // B: opens the next window, reports exactly its estimate.
    await get(`${gw.url}/sse?tokens=100&events=0`);
    await settlesAt(gw, 100);
    await slow;
    // A's 90 left over belonged to the first window: the second keeps B's 100.
    await settlesAt(gw, 100);
  });

  it('a sliding window takes a give-back within its aligned window; a token bucket always takes it back', async () => {
    const sliding = await start(
      config(llm.url, '{ estimate: 100, json: usage.total_tokens }', '{ limit: 1000, window: 1s, algorithm: sliding-window }'),
    );
    await sleep(1000 - (Date.now() % 1000) + 5);
    await get(`${sliding.url}/sse?tokens=10&events=0`);
    await settlesAt(sliding, 10);
    const bucket = await start(
      config(llm.url, '{ estimate: 100, json: usage.total_tokens }', '{ limit: 1000, window: 1h, algorithm: token-bucket }'),
    );
    await get(`${bucket.url}/sse?tokens=10&events=3&gap=100`);
    await settlesAt(bucket, 10);
  });

  it('a client that sends its next request on seeing the end: decided after the settlement, not refused on the last estimate', async () => {
    // 600 of 1000 per request, 10 reported: if the next request were decided before the last settled, it would see 1200 and get 429.
    const gw = await start(config(llm.url, '{ estimate: 600, header: x-usage-tokens }'));
    for (let i = 0; i < 20; i++) assert.equal((await get(`${gw.url}/header?tokens=10`)).status, 200, `request ${i + 1}`);
    const sse = await start(config(llm.url, '{ estimate: 600, json: usage.total_tokens }'));
    for (let i = 0; i < 10; i++) assert.equal((await get(`${sse.url}/sse?tokens=10&events=1`)).status, 200, `stream ${i + 1}`);
    await settlesAt(gw, 200);
  });

  it('a client that disconnects mid-stream of an answer without end: drained up to cost.drainBytes, then cut upstream and charged cost.missing', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens, drainBytes: 4096 }'));
    const cutBefore = llm.cut;
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/forever`, { agent: false }, (res) => {
        let seen = 0;
        res.on('data', () => {
          seen += 1;
          if (seen === 3) {
            req.destroy();
            resolve();
          }
        });
      });
      req.on('error', (e) => (req.destroyed ? undefined : reject(e)));
      req.end();
    });
    await settlesAt(gw, 1000);
    for (let i = 0; i < 50 && llm.cut === cutBefore; i++) await sleep(10);
    assert.equal(llm.cut, cutBefore + 1, 'the upstream stream was cut once the drain bound was spent');
  });

  it('an upstream that fails mid-body: the client connection is cut and cost.missing is charged (a cut body is a usage not read)', async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens }'));
    await assert.rejects(get(`${gw.url}/die?tokens=5`));
    await settlesAt(gw, 1000);
  });

  it("attacker's view: a client's x-usage-tokens never reaches the upstream and never prices its request", async () => {
    // missing: 100, so the echo's answer without a usage header (charged cost.missing) costs the estimate here.
    const gw = await start(config(llm.url, '{ estimate: 100, header: x-usage-tokens, missing: 100 }'));
    // Against a naive upstream that echoes request headers: without the strip, the client would pick its own price (0).
    await get(`${gw.url}/echo`, { headers: { 'x-usage-tokens': '0' } });
    assert.equal(llm.seen.at(-1)!.headers['x-usage-tokens'], undefined, 'stripped from the forwarded request');
    await settlesAt(gw, 100);
    await get(`${gw.url}/header?tokens=60`, { headers: { 'x-usage-tokens': '1' } });
    await settlesAt(gw, 160);
  });

  it("attacker's view: a huge SSE line passes whole to the client and the usage after it still counts", async () => {
    const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens }'));
    const reply = await get(`${gw.url}/sse?tokens=20&events=1&line=${8 * 1024 * 1024}`, { timeoutMs: 20_000 });
    assert.ok(reply.body.length > 8 * 1024 * 1024, 'relayed whole');
    await settlesAt(gw, 20);
  });

  it('a usage that is negative, fractional, NaN or a string: settled at the estimate, warned once per rule', async () => {
    forgetWarnings();
    const warnings: Array<{ code?: string; message: string }> = [];
    const onWarning = (w: Error & { code?: string }): void => void warnings.push({ code: w.code, message: w.message });
    process.on('warning', onWarning);
    try {
      const gw = await start(config(llm.url, '{ estimate: 100, json: usage.total_tokens, missing: 500 }', '{ limit: 5000, window: 1m }'));
      let expected = 0;
      for (const raw of ['-5', '2.5', 'NaN', '"12"']) {
        const reply = await get(`${gw.url}/json?raw=${encodeURIComponent(raw)}`);
        assert.equal(reply.status, 200);
        // NaN makes the body no JSON at all: nothing could be read, so it is a missing usage, not an invalid one.
        expected += raw === 'NaN' ? 500 : 100;
        await settlesAt(gw, expected);
      }
      const hgw = await start(config(llm.url, '{ estimate: 100, header: x-usage-tokens }').replace('name: llm', 'name: llm-h'));
      await get(`${hgw.url}/header?raw=-1`);
      await get(`${hgw.url}/header?raw=1e3`);
      await sleep(20);
    } finally {
      process.off('warning', onWarning);
    }
    const ours = warnings.filter((w) => w.code === WarningCode.COST_USAGE_INVALID);
    assert.equal(ours.length, 2, ours.map((w) => w.message).join('\n'));
    assert.match(
      ours[0]!.message,
      /^rule "llm": the upstream reported a cost that is not a whole number ≥ 0 in its field usage\.total_tokens \(-5\), so the request was charged the estimate/,
    );
    assert.match(ours[1]!.message, /^rule "llm-h": .* in its header x-usage-tokens \("-1"\)/);
  });
});

describe('config: a rule cost', () => {
  const rule = (cost: string, extra = ''): string =>
    `rules:\n  - name: llm\n    policies: ["1000/1m", { name: daily, limit: 50000, window: 1d }]\n${extra}    cost: ${cost}\n`;

  it('takes an estimate and a header, or an estimate and a dotted JSON path', async () => {
    const h = await parseConfigText(rule('{ estimate: 200, header: X-Usage-Tokens }'), 'gw.yaml');
    // cost.missing defaults to the smallest policy limit (1000 of 1000/1m and 50000/1d); drainBytes to 1 MiB.
    assert.deepEqual(h.rules[0]!.cost, {
      estimate: 200,
      missing: 1000,
      drainBytes: 1_048_576,
      requestUsage: false,
      source: { kind: 'header', header: 'x-usage-tokens' },
    });
    const j = await parseConfigText(rule('{ estimate: 200, json: usage.total_tokens, missing: 3000, drainBytes: 0 }'), 'gw.yaml');
    assert.deepEqual(j.rules[0]!.cost, {
      estimate: 200,
      missing: 3000,
      drainBytes: 0,
      requestUsage: false,
      source: { kind: 'json', path: ['usage', 'total_tokens'] },
    });
    const none = await parseConfigText('rules:\n  - name: a\n    policies: ["3/1m"]\n', 'gw.yaml');
    assert.equal(none.rules[0]!.cost, undefined);
  });

  it('refuses bad values with the file, line, column and field, saying what would be right', async () => {
    await rejectsConfig(
      rule('{ header: x-usage-tokens }'),
      /^gw\.yaml:4:11: rules\[0\]\.cost: needs an estimate: the units reserved before the request is forwarded/,
    );
    await rejectsConfig(
      rule('{ estimate: 0, header: x-usage-tokens }'),
      /rules\[0\]\.cost\.estimate: must be a whole number from 1 to 9007199254740991; got 0\./,
    );
    await rejectsConfig(rule('{ estimate: 2.5, header: x-usage-tokens }'), /rules\[0\]\.cost\.estimate: must be a whole number/);
    await rejectsConfig(rule('{ estimate: -1, header: x-usage-tokens }'), /rules\[0\]\.cost\.estimate: must be a whole number/);
    await rejectsConfig(
      rule('{ estimate: 1001, header: x-usage-tokens }'),
      /rules\[0\]\.cost\.estimate: 1001 is larger than the limit 1000 of policy "1000-per-1m", so no request could ever pass; lower the estimate or raise the limit\./,
    );
    await rejectsConfig(rule('{ estimate: 10 }'), /rules\[0\]\.cost: needs header \(a response header with the cost\) or json/);
    await rejectsConfig(
      rule('{ estimate: 10, header: x-a, json: usage.n }'),
      /rules\[0\]\.cost\.json: give either header or json, not both/,
    );
    await rejectsConfig(rule('{ estimate: 10, header: "bad header" }'), /rules\[0\]\.cost\.header: must be a header name/);
    for (const path of ['"usage..total"', '"usage.total tokens"', '""', '7', '"usage[0]"'])
      await rejectsConfig(
        rule(`{ estimate: 10, json: ${path} }`),
        /rules\[0\]\.cost\.json: must be a dotted path to a number in the response body/,
      );
    await rejectsConfig(
      rule('{ estimate: 10, header: x-a, unit: tokens }'),
      /rules\[0\]\.cost\.unit: unknown field "unit"; known fields here: estimate, header, json, missing, drainBytes, requestUsage\./,
    );
    await rejectsConfig(
      rule('{ estimate: 200, header: x-a, missing: 100 }'),
      /rules\[0\]\.cost\.missing: 100 is below the estimate 200: a client could then pay less by hiding its usage/,
    );
    await rejectsConfig(rule('{ estimate: 200, header: x-a, missing: -1 }'), /rules\[0\]\.cost\.missing: must be a whole number/);
    await rejectsConfig(rule('{ estimate: 200, header: x-a, drainBytes: 1.5 }'), /rules\[0\]\.cost\.drainBytes: must be a whole number/);
    await rejectsConfig(
      rule('{ estimate: 200, header: x-a, requestUsage: true }'),
      /rules\[0\]\.cost\.requestUsage: asks a streaming request for its usage in the body \(stream_options\.include_usage\), so it needs json/,
    );
    await rejectsConfig(rule('7'), /rules\[0\]\.cost: must be a mapping/);
    await rejectsConfig(
      rule('{ estimate: 10, header: x-a }', '    shadow: true\n'),
      /rules\[0\]\.cost: a shadow rule only reports, so it has nothing to reserve; remove cost or shadow\./,
    );
  });
});

describe('gateway: cost from the response, counted in a real Redis', () => {
  let llm: Llm;
  let redis: RedisServer;
  const gateways: Gateway[] = [];
  before(async () => {
    llm = await startLlm();
    redis = await startRedis();
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.shutdown()));
    llm.server.closeAllConnections();
    await new Promise((resolve) => llm.server.close(resolve));
    await redis?.stop();
  });

  for (const localFirst of [false, true]) {
    it(`${localFirst ? 'LocalFirstStore' : 'RedisStore'}: SSE usage over the estimate, a header under it, a disconnect at cost.missing`, async () => {
      const gw = await startGateway(
        `store: { type: redis, url: "${redis.url}", timeout: 500ms, localFirst: ${localFirst}, prefix: "fg:cost:${localFirst}" }\n${config(
          llm.url,
          '{ estimate: 100, json: usage.total_tokens, drainBytes: 2048, missing: 500 }',
        )}`,
      );
      gateways.push(gw);
      await untilReady(`${gw.url}/_floodgate/readyz`);
      await get(`${gw.url}/sse?tokens=250&events=3`);
      await settlesAt(gw, 250);
      await get(`${gw.url}/json?tokens=30`);
      await settlesAt(gw, 280);
      await new Promise<void>((resolve) => {
        const req = httpRequest(`${gw.url}/forever`, { agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.on('error', () => undefined);
        req.end();
      });
      await settlesAt(gw, 780);
    });
  }

  it('LocalFirstStore: a cost rule settles in the lease it holds, with no store call per settlement', async () => {
    const gw = await startGateway(
      `store: { type: redis, url: "${redis.url}", timeout: 500ms, localFirst: true, prefix: "fg:cost:lease" }\n${config(
        llm.url,
        '{ estimate: 100, json: usage.total_tokens }',
        '{ limit: 100000, window: 1m }',
      )}`,
    );
    gateways.push(gw);
    await untilReady(`${gw.url}/_floodgate/readyz`);
    const timed = async (): Promise<number> =>
      parseMetrics((await get(`${gw.url}/_floodgate/metrics`)).body).get(
        'floodgate_store_duration_seconds_count{store="redis-local-first",result="ok"}',
      ) ?? 0;
    await get(`${gw.url}/json?tokens=30`);
    await settlesAt(gw, 30);
    const before = await timed();
    for (let i = 0; i < 20; i += 1) assert.equal((await get(`${gw.url}/json?tokens=${i % 2 === 0 ? 30 : 170}`)).status, 200);
    await settlesAt(gw, 30 + 10 * 30 + 10 * 170);
    // 20 give-backs and excesses, none of them a store call: what was timed are the lease calls of the 2 000 units the
    // requests consumed (4 here), where settling through the store made 24.
    assert.ok((await timed()) - before < 10, `store calls during 20 settlements: ${(await timed()) - before}`);
  });
});
