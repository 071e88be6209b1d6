/** The run's redis-server (via test/support/redis-server.ts) and the harness's view of it: FLUSHALL, CONFIG RESETSTAT, INFO commandstats. */
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../../test/support/redis-server.js';
import { onCleanup } from './processes.js';

/** Commands the harness itself sends; they are not the server's work, so they are left out of the count. */
const HARNESS_COMMANDS = new Set(['info', 'config|resetstat', 'config', 'flushall']);

/** A redis-server for one scenario run, with a client for the harness's bookkeeping. */
export class BenchRedis {
  private constructor(
    /** `redis://host:port` handed to server processes. */
    readonly url: string,
    /** redis_version from INFO server. */
    readonly version: string,
    private readonly server: RedisServer,
    private readonly client: Redis,
    private readonly unregister: () => void,
  ) {}

  /**
   * Starts redis-server (without persistence, so no background save shows up
   * as latency) through test/support/redis-server.ts, on `cpus` when given.
   */
  static async start(cpus: string | undefined): Promise<BenchRedis> {
    const server = await startRedis(cpus === undefined ? {} : { cpus });
    // On a signal, stop() also removes the server's temp dir; on a bare exit only the kill can run.
    const unregister = onCleanup(
      () => void server.kill(),
      () => server.stop(),
    );
    // maxRetriesPerRequest 0: a dead Redis should fail the bookkeeping call now, not after 20 retries.
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    try {
      await client.connect();
      const info = await client.info('server');
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
      return new BenchRedis(server.url, version, server, client, unregister);
    } catch (error) {
      client.disconnect();
      await server.stop();
      unregister();
      throw error;
    }
  }

  /** Empties the data and zeroes the command statistics, so each variant starts alike. */
  async reset(): Promise<void> {
    await this.client.flushall();
    await this.resetStats();
  }

  /** Zeroes INFO commandstats. */
  async resetStats(): Promise<void> {
    await this.client.config('RESETSTAT');
  }

  /** Calls per command since the last reset, without the harness's own commands. */
  async commandCounts(): Promise<Record<string, number>> {
    const info = await this.client.info('commandstats');
    const counts: Record<string, number> = {};
    for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)(?:.*rejected_calls=(\d+))?/gm)) {
      const name = match[1]!;
      if (HARNESS_COMMANDS.has(name)) continue;
      // Rejected calls (e.g. wrong arity) never reach `calls` but were still sent to Redis.
      counts[name] = Number(match[2]) + Number(match[3] ?? 0);
    }
    return counts;
  }

  /** CPU ms redis-server has used since it started (INFO cpu: user + system, every thread). */
  async cpuMs(): Promise<number> {
    const info = await this.client.info('cpu');
    const seconds = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
    return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1000;
  }

  /** Quits the client and stops redis-server. */
  async stop(): Promise<void> {
    this.client.disconnect();
    await this.server.stop();
    this.unregister();
  }
}
