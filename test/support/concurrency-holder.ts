// Child process of the concurrency accuracy test: a ConcurrencyLimiter on its own ioredis client (Redis TIME, heartbeat on) that, told to, runs acquire/hold/release loops while a shared witness counter checks how many hold at once, or takes slots and holds them until killed.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { ConcurrencyLimiter, type Slot } from '../../src/index.js';
import { RedisStore } from '../../src/stores/redis/index.js';

/** Parent → child. */
export type HolderCommand =
  | { type: 'run'; key: string; limit: number; ttl: string; loops: number; ms: number; witness: string }
  | { type: 'hold'; key: string; limit: number; ttl: string; count: number }
  | { type: 'stop' };

/** Child → parent. */
export type HolderReport =
  | { type: 'ready' }
  | { type: 'ran'; admitted: number; refused: number; maxWitness: number; maxLocal: number }
  | { type: 'holding'; held: number }
  | { type: 'error'; message: string };

const url = process.argv[2];
if (url === undefined) throw new Error('usage: concurrency-holder.ts <redis url>');
const client = new Redis(url);
// The witness counter goes through a client of its own, so its calls never share a pipeline with the slot scripts.
const witnessClient = new Redis(url);
const store = new RedisStore({ client });
const held: Slot[] = [];
const send = (report: HolderReport): void => void process.send?.(report);

/** `loops` loops, each acquiring, holding 1–5 ms and releasing, for `ms` ms; the witness counts holders across every process. */
async function run(command: Extract<HolderCommand, { type: 'run' }>): Promise<HolderReport> {
  const limiter = new ConcurrencyLimiter({ store, limit: command.limit, ttl: command.ttl, prefix: 'acc' });
  const end = Date.now() + command.ms;
  let admitted = 0;
  let refused = 0;
  let maxWitness = 0;
  let local = 0;
  let maxLocal = 0;
  const loop = async (): Promise<void> => {
    while (Date.now() < end) {
      const slot = await limiter.acquire(command.key);
      if (!slot.allowed) {
        refused++;
        await sleep(1 + Math.random() * 3);
        continue;
      }
      admitted++;
      // Counted only between the admission and the release, so it is never above the slots really held.
      const holders = await witnessClient.incr(command.witness);
      maxWitness = Math.max(maxWitness, holders);
      maxLocal = Math.max(maxLocal, ++local);
      await sleep(1 + Math.random() * 4);
      local--;
      await witnessClient.decr(command.witness);
      await slot.release();
    }
  };
  await Promise.all(Array.from({ length: command.loops }, loop));
  return { type: 'ran', admitted, refused, maxWitness, maxLocal };
}

async function hold(command: Extract<HolderCommand, { type: 'hold' }>): Promise<HolderReport> {
  const limiter = new ConcurrencyLimiter({ store, limit: command.limit, ttl: command.ttl, prefix: 'acc' });
  for (let i = 0; i < command.count; i++) {
    const slot = await limiter.acquire(command.key);
    if (!slot.allowed) throw new Error(`hold: slot ${i + 1} of ${command.count} refused (${slot.inFlight} in use)`);
    held.push(slot);
  }
  // The heartbeat timers are unref'd: this keeps the process alive (and renewing) until it is killed.
  setInterval(() => {}, 1 << 30);
  return { type: 'holding', held: held.length };
}

process.on('message', (command: HolderCommand | undefined) => {
  if (command?.type === 'stop') {
    void Promise.all([client.quit(), witnessClient.quit()]).finally(() => process.exit(0));
    return;
  }
  if (command?.type !== 'run' && command?.type !== 'hold') return;
  (command.type === 'run' ? run(command) : hold(command)).then(send, (error: Error) => send({ type: 'error', message: error.message }));
});
send({ type: 'ready' });
