// `floodgate serve` on PostgreSQL (store.type: postgres): two gateways on one database share each limit exactly, a database that goes away gets the failure policy, and the section's mistakes are refused.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { startPostgres, type PostgresServer } from '../../support/postgres-server.js';
import { statusFrom } from '../support/from-address.js';
import { gatewayFixture } from '../support/harness.js';

const fixture = gatewayFixture();
let db: PostgresServer;
before(async () => {
  db = await startPostgres();
});
after(async () => {
  await db.stop();
});

const config = (extra = '') =>
  `upstream: ${fixture.upstream.url}\nstore: { type: postgres, url: "${db.url}"${extra} }\nrules:\n  - name: api\n    policies: ["4/1h"]\n`;

describe('store.type: postgres', () => {
  it('two gateways on one database share a limit exactly: 4 admitted in all, alternating between them', async () => {
    const [a, b] = await Promise.all([fixture.start(config()), fixture.start(config())]);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await statusFrom((i % 2 === 0 ? a : b).url, '127.0.0.7'));
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
  });

  it('an UNLOGGED table in a schema of its own, and a url alone says postgres', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nstore: { url: "${db.url}", table: public.gw_counts, unlogged: true }\nrules:\n  - name: api\n    policies: ["1/1h"]\n`,
    );
    assert.deepEqual([await statusFrom(g.url, '127.0.0.8'), await statusFrom(g.url, '127.0.0.8')], [200, 429]);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ p: string }>("SELECT relpersistence AS p FROM pg_class WHERE relname = 'gw_counts'");
      assert.deepEqual(rows, [{ p: 'u' }], 'the table is UNLOGGED');
    } finally {
      await client.end();
    }
  });

  it('a database that cannot be reached: the failure policy decides (fail-closed: 429), nothing hangs', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\nstore: { type: postgres, url: "postgres://postgres@127.0.0.1:1/none", timeout: 300ms, onFailure: fail-closed }\nrules:\n  - name: api\n    policies: ["5/1h"]\n`,
    );
    const started = Date.now();
    assert.equal(await statusFrom(g.url, '127.0.0.9'), 429);
    assert.ok(Date.now() - started < 5_000);
  });

  it('refused in the config: a URL that is not PostgreSQL, Redis-only fields, a bad table name', async () => {
    const rules = 'rules:\n  - { name: a, policies: ["1/1m"] }\n';
    const fails = (store: string, pattern: RegExp) => assert.rejects(parseConfigText(`store: ${store}\n${rules}`, 'f.yaml'), pattern);
    await fails('{ type: postgres, url: "redis://127.0.0.1:6379" }', /store\.url: must be the PostgreSQL connection URL/);
    await fails(
      '{ type: postgres, url: "postgres://db/app", localFirst: true }',
      /store\.localFirst: is not a setting of the PostgreSQL store/,
    );
    await fails('{ type: postgres, url: "postgres://db/app", table: "drop table x" }', /store\.table: must be a table name/);
    await fails('{ type: redis, url: "redis://127.0.0.1:6379", unlogged: true }', /store\.unlogged: is a setting of the PostgreSQL store/);
    await fails('{ type: cassandra }', /store\.type: must be "memory", "redis" or "postgres"/);
  });
});
