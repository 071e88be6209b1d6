// Exactness of reservations on leasing stores: 4 forked children reserve random estimates and settle them at random actuals (give-backs, excess charges past the limit, cancels, ttls that pass, reservations never settled), on local-first over a real redis-server and on the cluster store; afterwards the store's count is exactly what the children were charged.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RateLimiter } from '../../src/index.js';
import { ClusterStore, ClusterStorePrimary } from '../../src/stores/cluster/index.js';
import { redisKeys } from '../../src/stores/redis/index.js';
import { redisFixture } from '../support/redis-clients.js';
import type { RedisServer } from '../support/redis-server.js';
import type { ReservationHammerConfig, ReservationReport } from '../support/reservation-hammer.js';

const CHILD = fileURLToPath(new URL('../support/reservation-hammer.ts', import.meta.url));
const PROCESSES = 4;
const KEYS = ['a', 'b'];
/** Long enough that no window ends mid-run: every give-back lands in the window that counted its estimate. */
const WINDOW_MS = 600_000;

let server: RedisServer;
let reader: Redis;
const children: ChildProcess[] = [];
const redis = redisFixture((open, started) => {
  server = started;
  reader = open();
});
redis.cleanup(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** The next message of `child` of `type` (the cluster store's own messages share the channel), or its death as an error. */
function next<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`a child exited (code ${code}) before its ${type}`));
    const onMessage = (message: { type?: string; message?: string } | undefined): void => {
      if (message?.type !== type && message?.type !== 'error') return;
      child.off('exit', onExit);
      child.off('message', onMessage);
      if (message.type === 'error') reject(new Error(`a child failed: ${message.message}`));
      else resolve(message as T);
    };
    child.once('exit', onExit);
    child.on('message', onMessage);
  });
}

/** Forks the children, starts them together, and returns their reports once every child has closed its store. */
async function hammer(config: ReservationHammerConfig, onFork: (child: ChildProcess) => void = () => {}): Promise<ReservationReport[]> {
  const forked: ChildProcess[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    const child = fork(CHILD, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    forked.push(child);
    onFork(child);
  }
  await Promise.all(forked.map((child) => next(child, 'ready')));
  const reports = forked.map((child) => next<ReservationReport>(child, 'report'));
  for (const child of forked) child.send({ type: 'go' });
  return Promise.all(reports);
}

/** Per key: the sum of the children's `field`. */
function total(reports: ReservationReport[], field: 'charged' | 'fromLease', key: string): number {
  return reports.reduce((sum, r) => sum + (r[field][key] ?? 0), 0);
}

/** Counters over every report, for the assertions' messages and the run's coverage. */
function summary(reports: ReservationReport[]) {
  const sum = (f: 'admitted' | 'refused' | 'expired' | 'unsettled' | 'over' | 'under') => reports.reduce((s, r) => s + r[f], 0);
  return {
    admitted: sum('admitted'),
    refused: sum('refused'),
    expired: sum('expired'),
    unsettled: sum('unsettled'),
    over: sum('over'),
    under: sum('under'),
    sources: [...new Set(reports.flatMap((r) => r.sources))],
    inLease: {
      reward: reports.reduce((n, r) => n + r.settledFromLease.reward, 0),
      penalty: reports.reduce((n, r) => n + r.settledFromLease.penalty, 0),
    },
  };
}

test(
  '4 processes reserve and settle on local-first (leases): Redis counts exactly what they were charged',
  { timeout: 90_000 },
  async () => {
    const config: ReservationHammerConfig = {
      mode: 'local-first',
      url: server.url,
      channel: `reserve-${process.pid}`,
      limit: 8000,
      windowMs: WINDOW_MS,
      prefix: 'rsv-lf',
      keys: KEYS,
      reservations: 400,
      concurrency: 8,
    };
    const reports = await hammer(config);
    const s = summary(reports);
    const leased = reports.reduce((n, r) => n + (r.leases?.unitsLeased ?? 0), 0);
    const returned = reports.reduce((n, r) => n + (r.leases?.unitsReturned ?? 0), 0);
    const info = JSON.stringify({ ...s, leased, returned });
    assert.deepEqual(s.sources, ['store'], info);
    // The run pressed every rule: leases spent from, the limit reached, give-backs, excess charges, expiries.
    assert.ok(leased > 0 && KEYS.some((k) => total(reports, 'fromLease', `rsv-lf:${k}`) > 0), info);
    assert.ok(s.refused > 0 && s.over > 0 && s.under > 0 && s.expired > 0 && s.unsettled > 0, info);
    // Give-backs and excesses were settled in the leases too, without Redis.
    assert.ok(s.inLease.reward > 0 && s.inLease.penalty > 0, info);
    for (const key of KEYS) {
      const count = Number((await reader.hget(redisKeys(`rsv-lf:${key}`).state, 'c')) ?? 0);
      assert.equal(count, total(reports, 'charged', key), `key ${key}: ${info}`);
    }
    console.log(`reservations on local-first: ${info}`);
  },
);

test(
  '4 processes reserve and settle on the cluster store (leases): the primary counts exactly what they were charged, plus the leased units never spent',
  { timeout: 90_000 },
  async () => {
    const primary = new ClusterStorePrimary();
    // A limit no run reaches, so the primary's `remaining` reads its count exactly.
    const limit = 1_000_000;
    const store = new ClusterStore({ transport: 'local', knownRefusals: 0 });
    const peeker = new RateLimiter({ store, limit, window: WINDOW_MS, prefix: 'rsv-cl' });
    try {
      const reports = await hammer(
        { mode: 'cluster', limit, windowMs: WINDOW_MS, prefix: 'rsv-cl', keys: KEYS, reservations: 400, concurrency: 8 },
        (child) => primary.attach(child),
      );
      const s = summary(reports);
      const { unitsLeased } = primary.stats();
      let fromLease = 0;
      for (const key of KEYS) fromLease += total(reports, 'fromLease', `rsv-cl:${key}`);
      const info = JSON.stringify({ ...s, unitsLeased, fromLease });
      assert.deepEqual(s.sources, ['store'], info);
      assert.ok(unitsLeased > 0 && fromLease > 0, info);
      assert.ok(s.over > 0 && s.under > 0 && s.expired > 0 && s.unsettled > 0, info);
      assert.ok(s.inLease.reward > 0 && s.inLease.penalty > 0, info);
      // The primary counts a lease's surplus when it grants it; the children spent `fromLease` of it (net
      // of the give-backs settled into their leases), the rest was still held when they stopped or
      // dropped when a penalty the lease could not cover revoked the leases.
      let count = 0;
      let charged = 0;
      for (const key of KEYS) {
        count += limit - (await peeker.peek(key)).remaining;
        charged += total(reports, 'charged', key);
      }
      assert.equal(count, charged + unitsLeased - fromLease, info);
      console.log(`reservations on the cluster store: ${info}`);
    } finally {
      await store.close();
      await primary.close();
    }
  },
);
