// Conformance suite and shared vectors on a real PostgreSQL (one server for the file), through a node-postgres Pool.
import { after, before } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/stores/postgres/index.js';
import { startPostgres, type PostgresServer } from '../support/postgres-server.js';
import { runVectors } from '../vectors/format.js';
import type { ConformanceFactory } from './suite.js';
import { runConformance } from './suite.js';

let server: Promise<PostgresServer> | undefined;
before(() => {
  server = startPostgres();
});
after(async () => {
  await server?.then((s) => s.stop());
});

/** PostgresStore over a pg.Pool on the file's server, with the suite's clock; `unlogged` for the second table. */
function postgresTarget(table: string, unlogged: boolean): ConformanceFactory {
  return async (clock) => {
    const { url } = await server!;
    const client = new pg.Pool({ connectionString: url, max: 4 });
    const store = new PostgresStore({ client, clock, table, unlogged, timeoutMs: 5000 });
    return { store, failureScope: { kind: 'absent' }, teardown: async () => (await store.close(), await client.end()) };
  };
}

runConformance('postgres', postgresTarget('floodgate_counters', false));
runVectors('postgres', postgresTarget('floodgate_counters', false));
runConformance('postgres (unlogged)', postgresTarget('floodgate_unlogged', true));
