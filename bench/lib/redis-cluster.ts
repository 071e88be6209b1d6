/** The run's Redis Cluster (3 masters, via test/support/redis-server.ts) for variants that count on one: start, empty, stop. */
import { Redis } from 'ioredis';
import { startRedisCluster, type RedisCluster } from '../../test/support/redis-server.js';
import { onCleanup } from './processes.js';

/** A 3-master Redis Cluster for one scenario run, every node pinned to the Redis core. */
export class BenchRedisCluster {
  private constructor(
    /** `host:port,…` of the masters, handed to server processes. */
    readonly nodes: string,
    private readonly cluster: RedisCluster,
    private readonly clients: Redis[],
    private readonly unregister: () => void,
  ) {}

  /** Starts the cluster on `cpus` when given (all nodes share them, as one Redis would share its core). */
  static async start(cpus: string | undefined): Promise<BenchRedisCluster> {
    const cluster = await startRedisCluster(cpus === undefined ? {} : { cpus });
    const unregister = onCleanup(
      () => cluster.servers.forEach((s) => void s.kill()),
      () => cluster.stop(),
    );
    const clients = cluster.nodes.map((n) => new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 0 }));
    return new BenchRedisCluster(cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','), cluster, clients, unregister);
  }

  /** Empties every node, so each variant starts alike. */
  async reset(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.flushall()));
  }

  /** Quits the clients and stops the nodes. */
  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    await this.cluster.stop();
    this.unregister();
  }
}
