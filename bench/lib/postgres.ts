/** The run's PostgreSQL (via test/support/postgres-server.ts), pinned like Redis, emptied between variants. */
import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { startPostgres, type PostgresServer } from '../../test/support/postgres-server.js';
import { onCleanup } from './processes.js';

/** A PostgreSQL server for one scenario run, with a client for the harness's bookkeeping. */
export class BenchPostgres {
  private constructor(
    /** `postgres://…` handed to server processes. */
    readonly url: string,
    /** server_version. */
    readonly version: string,
    private readonly server: PostgresServer,
    private readonly client: pg.Client,
    private readonly unregister: () => void,
  ) {}

  /**
   * Starts PostgreSQL (durability off, as the tests run it: the benchmark measures the limiters, not the disk), with
   * the postmaster and so every backend it forks pinned to `cpus` when given.
   */
  static async start(cpus: string | undefined): Promise<BenchPostgres> {
    const server = await startPostgres();
    const unregister = onCleanup(
      () => void server.stop(),
      () => server.stop(),
    );
    const client = new pg.Client({ connectionString: server.url });
    try {
      await client.connect();
      const version = String((await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? 'unknown');
      if (cpus !== undefined) {
        // The postmaster is this session's backend's parent; backends forked from now on inherit its affinity.
        const backend = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const parent = spawnSync('ps', ['-o', 'ppid=', '-p', String(backend)], { encoding: 'utf8' }).stdout.trim();
        for (const pid of [parent, String(backend)]) spawnSync('taskset', ['-a', '-cp', cpus, pid], { stdio: 'ignore' });
      }
      return new BenchPostgres(server.url, version, server, client, unregister);
    } catch (error) {
      await client.end().catch(() => undefined);
      await server.stop();
      unregister();
      throw error;
    }
  }

  /** Drops every table and function a variant made, so each variant starts alike. */
  async reset(): Promise<void> {
    await this.client.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
  }

  async stop(): Promise<void> {
    await this.client.end().catch(() => undefined);
    await this.server.stop();
    this.unregister();
  }
}
