/** The gateway's ioredis client for one Redis, a Redis Cluster or a Sentinel set-up, checked at start. */
/**
 * ioredis's own `Cluster` and Sentinel support (`new Redis({ sentinels, name })`) are used: the stores already drive
 * both (docs/redis-clients.md), `duplicate()` makes the pub/sub connections from the same options on either, and
 * each follows its topology by itself (MOVED/ASK and slot refreshes; `+switch-master` and asking the sentinels
 * again on every reconnection). A Cluster or Sentinel set-up must answer at start, within `connectTimeout`, or the
 * gateway stops with FLOODGATE_STORE_UNREACHABLE naming the field: a wrong seed list or master name is a deployment
 * mistake to see before serving, not at the first request. One server keeps its behaviour: start goes on while it
 * is away, and readiness waits for it.
 */
import type { ConnectionOptions } from 'node:tls';
import { ErrorCode, FloodgateError } from '../../index.js';
import type { Ioredis } from '../runtime/optional-deps.js';
import type { RedisConnection, RedisNode, StoreSettings } from '../config/settings.js';

/** The ioredis client the store, the allow lists, the overrides and the admin broadcast share (a `Redis` or a `Cluster`). */
export type GatewayRedisClient = InstanceType<Ioredis['Redis']> | InstanceType<Ioredis['Cluster']>;

/** Reconnection steps: short, so a restarted or promoted server is noticed within a second (the store fails calls meanwhile). */
const retry = (attempt: number): number => Math.min(50 * attempt, 1000);

/** The client of `settings` (a Redis store's), and its description for the log and the dashboard (no secrets). */
export async function openRedisClient(
  ioredis: Ioredis,
  settings: StoreSettings,
): Promise<{ client: GatewayRedisClient; description: string }> {
  const c = settings.connection;
  if (c === undefined || c.topology === 'single') {
    // The store already fails calls at once while ioredis reconnects (maxRetriesPerRequest: 1).
    const client = new ioredis.Redis(settings.url!, {
      maxRetriesPerRequest: 1,
      retryStrategy: retry,
      ...(c === undefined ? {} : serverOptions(c)),
    });
    return { client, description: `redis ${redactUrl(settings.url!)}${c === undefined ? '' : credentialsNote(c)}` };
  }
  if (c.topology === 'cluster') {
    const client = new ioredis.Cluster(
      c.nodes.map((n) => ({ host: n.host, port: n.port })),
      {
        redisOptions: { maxRetriesPerRequest: 1, ...serverOptions(c) },
        clusterRetryStrategy: retry,
        // A Cluster client sends each call on its own; this writes the calls of one tick to a node together (docs/redis-clients.md).
        enableAutoPipelining: true,
        // With TLS, the certificates name the hosts: keep them instead of resolving to addresses first (as ElastiCache needs).
        ...(c.tls === undefined ? {} : { dnsLookup: (address: string, done: (e: null, a: string) => void) => done(null, address) }),
      },
    );
    await untilReady(client, c, `store Redis Cluster ${list(c.nodes)}`);
    return { client, description: `redis-cluster ${list(c.nodes)}${credentialsNote(c)}` };
  }
  await findMaster(ioredis, c);
  const client = new ioredis.Redis({
    sentinels: c.nodes.map((n) => ({ host: n.host, port: n.port })),
    name: c.masterName!,
    ...serverOptions(c),
    ...(c.sentinelUsername === undefined ? {} : { sentinelUsername: c.sentinelUsername }),
    ...(c.sentinelPassword === undefined ? {} : { sentinelPassword: c.sentinelPassword }),
    ...(c.tls === undefined ? {} : { enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(c) }),
    maxRetriesPerRequest: 1,
    retryStrategy: retry,
    sentinelRetryStrategy: retry,
    // Subscribe to the sentinels' +switch-master and reconnect on it. Without it a master that hangs (a partition that
    // drops packets, a stopped VM) keeps the connection open: the client never asks the sentinels again and every call
    // goes to the fallback for as long as the old master hangs. Costs one connection per sentinel for each client.
    failoverDetector: true,
  });
  await untilReady(client, c, `master ${JSON.stringify(c.masterName)} (found through the sentinels ${list(c.nodes)})`);
  return { client, description: `redis-sentinel ${c.masterName}@${list(c.nodes)}${credentialsNote(c)}` };
}

/** The options every server connection takes: ACL user, password, TLS, connect timeout. */
function serverOptions(c: RedisConnection): { username?: string; password?: string; tls?: ConnectionOptions; connectTimeout: number } {
  return {
    ...(c.username === undefined ? {} : { username: c.username }),
    ...(c.password === undefined ? {} : { password: c.password }),
    ...(c.tls === undefined ? {} : { tls: tlsOptions(c) }),
    connectTimeout: c.connectTimeoutMs,
  };
}

function tlsOptions(c: RedisConnection): ConnectionOptions {
  const t = c.tls!;
  return { ...(t.ca === undefined ? {} : { ca: t.ca }), ...(t.cert === undefined ? {} : { cert: t.cert, key: t.key }) };
}

/** What the description adds for the connection's options: whether a user, a password and TLS are used, never their values. */
function credentialsNote(c: RedisConnection): string {
  const parts = [
    ...(c.username === undefined ? [] : [`user ${c.username}`]),
    ...(c.password === undefined ? [] : ['password ***']),
    ...(c.tls === undefined ? [] : ['tls']),
  ];
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}

const list = (nodes: readonly RedisNode[]): string => nodes.map((n) => `${n.host}:${n.port}`).join(',');

/** The field an error at start names: the config file's, or the flag. */
function fieldOf(c: RedisConnection, part: string): string {
  return c.field.startsWith('--') ? c.field : `${c.field}.${part}`;
}

function unreachable(c: RedisConnection, part: string, message: string, cause?: unknown): FloodgateError {
  return new FloodgateError(ErrorCode.STORE_UNREACHABLE, `${fieldOf(c, part)}: ${message}`, cause);
}

/** What an error from a server says, credentials refused told apart from a node that is away. */
function reason(error: unknown): string {
  // A Cluster client reports "Failed to refresh slots cache." and keeps what the nodes said in lastNodeError.
  const node = (error as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  const inner = node instanceof Error ? node : error;
  const text = inner instanceof Error ? inner.message : String(inner);
  if (/WRONGPASS|NOAUTH|invalid username-password|NOPERM/i.test(text))
    return `the credentials were refused (${text.split('\n')[0]}): check username and passwordFile/passwordEnv`;
  // Without its own final period: the messages built on it end with theirs ("Connection is closed.." otherwise).
  return text.split('\n')[0]!.replace(/\.+$/, '');
}

/**
 * Resolves once `client` is ready; disconnects it and throws STORE_UNREACHABLE when `connectTimeoutMs` passes first.
 * The client keeps trying meanwhile (a node still starting is waited for); the error carries its last complaint.
 */
async function untilReady(client: GatewayRedisClient, c: RedisConnection, what: string): Promise<void> {
  let last: unknown;
  const onError = (error: unknown): void => {
    last = error;
  };
  client.on('error', onError);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timeout')), c.connectTimeoutMs);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  } catch {
    client.disconnect();
    const detail = last === undefined ? 'no answer' : reason(last);
    const part = c.topology === 'cluster' ? 'cluster.nodes' : 'sentinel';
    throw unreachable(
      c,
      part,
      `the ${what} did not answer within ${c.connectTimeoutMs} ms (connectTimeout): ${detail}. Check the addresses and that the servers run; a node that is not in cluster mode answers "cluster support disabled".`,
      last,
    );
  } finally {
    client.off('error', onError);
  }
}

/**
 * Asks every sentinel for the master's address: resolves when one knows it; throws STORE_UNREACHABLE naming
 * `sentinel.name` when the sentinels answer but none knows the name, `sentinel.sentinels` when none answers.
 */
async function findMaster(ioredis: Ioredis, c: RedisConnection): Promise<void> {
  const asks = c.nodes.map(async (n) => {
    const sentinel = new ioredis.Redis({
      host: n.host,
      port: n.port,
      ...(c.sentinelUsername === undefined ? {} : { username: c.sentinelUsername }),
      ...(c.sentinelPassword === undefined ? {} : { password: c.sentinelPassword }),
      ...(c.tls === undefined ? {} : { tls: tlsOptions(c) }),
      connectTimeout: c.connectTimeoutMs,
      commandTimeout: c.connectTimeoutMs,
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
    });
    sentinel.on('error', () => {});
    try {
      await sentinel.connect();
      return { node: n, answer: (await sentinel.call('SENTINEL', 'get-master-addr-by-name', c.masterName!)) as unknown };
    } catch (error) {
      return { node: n, error };
    } finally {
      sentinel.disconnect();
    }
  });
  const answers = await Promise.all(asks);
  if (answers.some((a) => Array.isArray(a.answer))) return;
  const answered = answers.filter((a) => !('error' in a));
  if (answered.length > 0)
    throw unreachable(
      c,
      'sentinel.name',
      `the sentinels ${list(answered.map((a) => a.node))} answer but monitor no master named ${JSON.stringify(c.masterName)}; use the name of their "sentinel monitor NAME …" line (redis-cli -p 26379 SENTINEL MASTERS lists them).`,
    );
  const first = answers.find((a) => 'error' in a) as { error: unknown } | undefined;
  throw unreachable(
    c,
    'sentinel.sentinels',
    `no sentinel of ${list(c.nodes)} answered within ${c.connectTimeoutMs} ms (connectTimeout): ${reason(first?.error)}.`,
    first?.error,
  );
}

/** The URL without a password, for logs and the dashboard: in `user:pass@`, or in the query, where ioredis reads `?password=` too. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    for (const name of [...u.searchParams.keys()]) if (/pass|secret|token/i.test(name)) u.searchParams.set(name, '***');
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/**
 * `report`, which on a Cluster also asks the client to refresh its slot map after a failed store call, at most once a
 * second. The slot map decides which node's breaker a key's calls count against (RedisStore.failureScope), and a master
 * that hangs sends no MOVED and no error: only a refresh learns of its replica's promotion. (A refresh on a timer, every
 * second, cost about 10 µs of gateway CPU per request in the gateway benchmark; a failed call costs far more anyway.)
 */
export function refreshingOnFailure(client: GatewayRedisClient, report: (error: unknown) => void): (error: unknown) => void {
  if (!('refreshSlotsCache' in client)) return report;
  let last = -Infinity;
  return (error) => {
    report(error);
    const now = performance.now();
    if (now - last < 1000) return;
    last = now;
    client.refreshSlotsCache();
  };
}
