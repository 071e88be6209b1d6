// The forwarding bench scenario: listed with its seven variants, and each variant's server forwards to the upstream the harness gives it, with no upstream of its own in its process tree (whose CPU the harness counts as the server's).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startServer, type RunningServer } from '../../bench/lib/server.js';
import scenario from '../../bench/scenarios/forwarding.js';
import { startRedis, type RedisServer } from '../support/redis-server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = fileURLToPath(new URL('../../dist', import.meta.url));
const UPSTREAM = fileURLToPath(new URL('../../bench/servers/gateway-upstream.ts', import.meta.url));
const FORWARDERS = ['node-proxy', 'nginx', 'nginx-limit-req', 'floodgate-bare', 'floodgate-memory', 'floodgate-redis'];
/** The forwarders, then the plain server that answers by itself (the tail targets' reference). */
const VARIANTS = [...FORWARDERS, 'node-http'];

let redis: RedisServer;
let upstream: RunningServer;

before(async () => {
  redis = await startRedis();
  // As the harness starts it for a scenario with `upstream: true`.
  upstream = await startServer({ name: 'upstream', server: UPSTREAM }, { cwd: ROOT, cpus: undefined, dist: DIST, redisUrl: undefined });
});

after(async () => {
  await upstream?.stop();
  await redis?.stop();
});

/** The command names of every descendant of `pid`, read from /proc. */
function descendants(pid: number): string[] {
  const parent = new Map<number, { ppid: number; comm: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      parent.set(Number(entry), { ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]), comm });
    } catch {
      // exited meanwhile
    }
  }
  const found: string[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const at = queue.pop()!;
    for (const [child, { ppid, comm }] of parent) {
      if (ppid !== at) continue;
      found.push(comm);
      queue.push(child);
    }
  }
  return found;
}

describe('bench scenario forwarding', () => {
  it('is listed with its seven variants, node-proxy first (the baseline), node-http last', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bench/run.ts'], { cwd: ROOT });
    const listed = stdout.slice(stdout.indexOf('\n  forwarding '));
    assert.match(listed, /^\n {2}forwarding /);
    assert.deepEqual(
      scenario.variants.map((v) => v.name),
      VARIANTS,
    );
    for (const name of VARIANTS) assert.match(listed, new RegExp(`\\n {6}${name} `), `${name} is listed`);
    assert.equal(scenario.upstream, true);
  });

  for (const name of FORWARDERS) {
    it(`${name}: forwards GET and POST to the harness's upstream, and runs no upstream of its own`, async () => {
      const variant = scenario.variants.find((v) => v.name === name)!;
      const server = await startServer(variant, {
        cwd: ROOT,
        cpus: undefined,
        dist: DIST,
        redisUrl: variant.redis ? redis.url : undefined,
        upstreamUrl: `http://127.0.0.1:${upstream.port}`,
      });
      try {
        for (const init of [{ method: 'GET' }, { method: 'POST', body: 'x'.repeat(100_000) }]) {
          const response = await fetch(`http://127.0.0.1:${server.port}/some/path?q=1`, { ...init, headers: { 'x-api-key': 'api-key-1' } });
          assert.equal(response.status, 200, `${init.method}`);
          assert.equal(await response.text(), '{}');
        }
        // A forked upstream would be a node process in the tree, its CPU counted as the server's.
        assert.deepEqual(
          descendants(server.pid!).filter((comm) => comm.startsWith('node')),
          [],
        );
      } finally {
        await server.stop();
      }
    });
  }
});
