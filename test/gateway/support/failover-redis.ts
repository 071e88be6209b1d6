// What the failover tests read from the Redis servers themselves: a node's role, its replica, and the gateway's counts on it.
import { Redis } from 'ioredis';

/** A server's address. */
export interface Node {
  host: string;
  port: number;
}

/** A plain connection to one server (no cluster redirections), errors ignored: the tests kill servers. */
function connect(node: Node): Redis {
  const r = new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  r.on('error', () => {});
  return r;
}

/**
 * Polls `node`'s ROLE every 20 ms until it is a master; resolves with the time (epoch ms) it first said so. A sentinel
 * closes the promoted server's client connections (CLIENT KILL), so a poll that fails reconnects.
 */
export async function whenMaster(node: Node, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let r: Redis | undefined;
  try {
    for (;;) {
      try {
        if (r === undefined) {
          r = connect(node);
          await r.connect();
        }
        const role = (await r.call('ROLE')) as [string, ...unknown[]];
        if (role[0] === 'master') return Date.now();
      } catch {
        r?.disconnect();
        r = undefined;
      }
      if (Date.now() > deadline) throw new Error(`${node.host}:${node.port} was not promoted within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    r?.disconnect();
  }
}

/** The replica (of `candidates`) of the Cluster master `master`, by CLUSTER NODES. */
export async function clusterReplicaOf(master: Node, candidates: readonly Node[]): Promise<Node> {
  const r = connect(master);
  await r.connect();
  try {
    const lines = String(await r.call('CLUSTER', 'NODES'))
      .trim()
      .split('\n');
    const id = lines.find((l) => l.split(' ')[2]!.includes('myself'))!.split(' ')[0]!;
    const replica = lines.find((l) => l.split(' ')[3] === id);
    if (replica === undefined) throw new Error(`master ${master.port} has no replica`);
    const port = Number(/:(\d+)@/.exec(replica.split(' ')[1]!)![1]);
    return candidates.find((c) => c.port === port)!;
  } finally {
    r.disconnect();
  }
}

/**
 * The gateway's fixed-window counts on `node`, by API key: each counter is a hash whose `c` is the units admitted in
 * its window, under a key ending in `:KEY}` (the hash tag `{RULE:KEY}` on a Cluster). `replica` sends READONLY first,
 * which a Cluster replica needs to answer for its master's slots.
 */
export async function gatewayCounts(node: Node, options: { replica?: boolean; cluster?: boolean } = {}): Promise<Map<string, number>> {
  const r = connect(node);
  await r.connect();
  try {
    if (options.replica === true && options.cluster === true) await r.call('READONLY');
    const keys = (await r.keys('*fg:gw:*')).sort();
    const counts = await Promise.all(keys.map((k) => r.hget(k, 'c')));
    const out = new Map<string, number>();
    keys.forEach((k, i) => {
      // The test's API keys hold no `:` or `}`.
      const api = k.replace(/\}$/, '').slice(k.lastIndexOf(':') + 1);
      if (api !== undefined && counts[i] !== null) out.set(api, Number(counts[i]));
    });
    return out;
  } finally {
    r.disconnect();
  }
}

/** Sends one command to `node` and resolves with the reply. */
export async function command(node: Node, ...args: string[]): Promise<unknown> {
  return (await commands(node, [args]))[0];
}

/** Sends `list`'s commands to `node` one after another on one connection; resolves with their replies. */
export async function commands(node: Node, list: readonly (readonly string[])[]): Promise<unknown[]> {
  const r = connect(node);
  await r.connect();
  try {
    const replies: unknown[] = [];
    for (const args of list) replies.push(await r.call(args[0]!, ...args.slice(1)));
    return replies;
  } finally {
    r.disconnect();
  }
}

/**
 * How far `replica` is behind `master` (both asked at once): the master's replication offset minus the replica's own.
 * The master's view of its replica's offset (INFO's slaveN:offset) is only as new as the last REPLCONF ACK, once a second.
 */
export async function replicaLagBytes(master: Node, replica: Node): Promise<number> {
  const [m, r] = await Promise.all([command(master, 'INFO', 'replication'), command(replica, 'INFO', 'replication')]);
  const offset = (info: unknown, field: string): number => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(String(info))?.[1]);
  return Math.max(0, offset(m, 'master_repl_offset') - offset(r, 'slave_repl_offset'));
}

/** Polls sentinel `sentinel` every 20 ms until it names `master` for `name`; resolves with the time (epoch ms) it first did. */
export async function whenSentinelNames(sentinel: Node, name: string, master: Node, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const addr = (await command(sentinel, 'SENTINEL', 'get-master-addr-by-name', name).catch(() => null)) as string[] | null;
    if (addr !== null && Number(addr[1]) === master.port) return Date.now();
    if (Date.now() > deadline) throw new Error(`sentinel ${sentinel.port} did not name ${master.port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
