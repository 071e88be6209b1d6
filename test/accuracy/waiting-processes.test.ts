// Waiting across processes: 4 forked children keep consumes with wait of one key in flight on one real redis-server; every fixed window admits exactly its limit, and no call waits past its timeout.
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { nextMessage } from '../support/child-messages.js';
import type { Admission, HammerReport } from '../support/waiting-hammer.js';

const CHILD = fileURLToPath(new URL('../support/waiting-hammer.ts', import.meta.url));
const PROCESSES = 4;
const LIMIT = 20;
const WINDOW_MS = 500;
const TIMEOUT_MS = 1500;
const IN_FLIGHT = 10;
const RUN_MS = 5000;

let server: RedisServer;
before(async () => {
  server = await startRedis();
});
after(async () => {
  await server.stop();
});

/** Groups admissions by the window they were admitted in: window ends less than half a window apart are one window. */
function perWindow(admissions: Admission[]): { end: number; count: number }[] {
  const sorted = [...admissions].sort((a, b) => a.windowEnd - b.windowEnd);
  const windows: { end: number; count: number }[] = [];
  for (const a of sorted) {
    const last = windows[windows.length - 1];
    if (last !== undefined && a.windowEnd - last.end < WINDOW_MS / 2) last.count++;
    else windows.push({ end: a.windowEnd, count: 1 });
  }
  return windows;
}

test(`${PROCESSES} processes waiting on one key: each fixed window admits exactly the limit, and no call waits past its timeout`, async () => {
  const forked: ChildProcess[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    const args = [server.url, 'waitproc', String(LIMIT), String(WINDOW_MS), String(TIMEOUT_MS), String(IN_FLIGHT)];
    forked.push(fork(CHILD, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  }
  await Promise.all(forked.map((child) => nextMessage(child, 'ready')));
  for (const child of forked) child.send({ type: 'go' });
  await new Promise((resolve) => setTimeout(resolve, RUN_MS));
  const reports = forked.map((child) => nextMessage<HammerReport>(child, 'report'));
  for (const child of forked) child.send({ type: 'stop' });
  const all = await Promise.all(reports);

  const admissions = all.flatMap((r) => r.admissions);
  const windows = perWindow(admissions);
  const maxWaited = Math.max(...all.map((r) => r.maxWaitedMs));
  const unexplained = Math.max(...all.map((r) => r.maxUnexplainedMs));
  const explained = Math.max(...all.map((r) => r.maxExplainedMs));
  const perProcess = all.map((r) => r.admissions.length);
  console.log(
    `${PROCESSES} processes, limit ${LIMIT} per ${WINDOW_MS} ms: ${windows.length} windows admitted ${windows.map((w) => w.count).join(', ')}; ` +
      `per process ${perProcess.join(', ')}; refused ${all.reduce((n, r) => n + r.refused, 0)}; longest wait ${maxWaited} ms (timeout ${TIMEOUT_MS}); ` +
      `past the timeout at most ${unexplained} ms beyond the ${explained} ms the event loop and the store took`,
  );
  assert.ok(windows.length >= RUN_MS / WINDOW_MS - 1, `${windows.length} windows`);
  // Demand stays above the limit throughout, so every window is full, the last one (cut by the stop) at most.
  for (const w of windows.slice(0, -1)) assert.equal(w.count, LIMIT, `a window ending at ${w.end} admitted ${w.count}`);
  assert.ok(windows[windows.length - 1]!.count <= LIMIT);
  // No retry is scheduled past a deadline: a call is answered by a timer at its deadline, or, behind a
  // store call then in flight, when that call comes back. How late a loaded machine runs this process's
  // timers, and how long its store calls take, are measured in the child (see waiting-hammer.ts), not
  // guessed: a wait may run past the timeout by those, and by no more (1 ms: clock readings in whole ms).
  assert.ok(
    unexplained <= 1,
    `a call waited ${unexplained} ms past its timeout beyond the ${explained} ms measured (longest wait ${maxWaited} ms)`,
  );
  // Every process got a share: the store decides across processes, each process's line is FIFO.
  for (const n of perProcess) assert.ok(n > 0);
});
