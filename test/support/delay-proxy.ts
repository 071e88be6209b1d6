// A TCP proxy that adds latency each way (e.g. 20–60 ms), to test and benchmark against a "remote" Redis on this host.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { pathToFileURL } from 'node:url';

/** Options of {@link startDelayProxy}. */
export interface DelayProxyOptions {
  /** Where to forward to. */
  targetHost?: string;
  targetPort: number;
  /** Added one-way delay in ms: a fixed number, or [min, max] drawn per chunk. Default 20. */
  delayMs?: number | readonly [number, number];
  /** Port to listen on; default a free one. */
  port?: number;
}

/** A running proxy. */
export interface DelayProxy {
  host: string;
  port: number;
  /** `redis://host:port` of the proxy. */
  url: string;
  /** Destroys every proxied connection (both sides see a reset), keeping the listener. */
  dropConnections(): void;
  /** Closes the listener and every connection; idempotent. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';

/**
 * Starts the proxy. Each chunk is forwarded once its delay has passed and
 * never before a chunk that arrived earlier on the same direction, so the
 * byte stream stays in order even with a random delay; a round trip thus
 * costs about twice the delay.
 */
export function startDelayProxy(options: DelayProxyOptions): Promise<DelayProxy> {
  const targetHost = options.targetHost ?? HOST;
  const delay = options.delayMs ?? 20;
  const pick = (): number => (typeof delay === 'number' ? delay : delay[0] + Math.random() * (delay[1] - delay[0]));
  const sockets = new Set<Socket>();

  /**
   * Pipes `from` into `to` with the delay, keeping order. One queue and one
   * timer per direction, on the monotonic clock: a timer per chunk lets two
   * chunks due in the same millisecond fire in either order (Node's timer
   * lists are per duration, and a wall-clock "due" turned into a duration
   * drifts by a ms between chunks), which swaps Redis replies between the
   * commands they answer.
   */
  const pipe = (from: Socket, to: Socket): void => {
    const queue: { due: number; chunk: Buffer }[] = [];
    let head = 0;
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const release = (): void => {
      timer = undefined;
      const now = performance.now();
      while (head < queue.length && queue[head]!.due <= now) {
        const { chunk } = queue[head++]!;
        if (!to.destroyed) to.write(chunk);
      }
      // Drop forwarded entries now and then, so a connection that never goes quiet does not keep them all.
      if (head >= 1024 && head < queue.length) {
        queue.splice(0, head);
        head = 0;
      }
      if (head === queue.length) {
        queue.length = 0;
        head = 0;
        if (ended && !to.destroyed) to.end();
        return;
      }
      timer = setTimeout(release, Math.max(1, Math.ceil(queue[head]!.due - now)));
    };
    from.on('data', (chunk: Buffer) => {
      const last = head < queue.length ? queue[queue.length - 1]!.due : 0;
      queue.push({ due: Math.max(performance.now() + pick(), last), chunk });
      timer ??= setTimeout(release, Math.max(1, Math.ceil(queue[head]!.due - performance.now())));
    });
    from.on('end', () => {
      ended = true;
      if (timer === undefined && head === queue.length && !to.destroyed) to.end();
    });
    from.on('close', () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    });
  };

  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: targetHost, port: options.targetPort });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    pipe(client, upstream);
    pipe(upstream, client);
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      let stopped = false;
      resolve({
        host: HOST,
        port,
        url: `redis://${HOST}:${port}`,
        dropConnections() {
          for (const s of sockets) s.destroy();
        },
        stop() {
          if (stopped) return Promise.resolve();
          stopped = true;
          for (const s of sockets) s.destroy();
          return new Promise<void>((done) => server.close(() => done()));
        },
      });
    });
  });
}

// Run as a program (the benchmark does): `node --import tsx test/support/delay-proxy.ts <targetPort> <delayMs>`;
// prints `port <n>` once listening and stops on SIGTERM.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const targetPort = Number(process.argv[2]);
  const delayMs = Number(process.argv[3] ?? 20);
  startDelayProxy({ targetPort, delayMs }).then(
    (proxy) => {
      process.stdout.write(`port ${proxy.port}\n`);
      const stop = (): void => void proxy.stop().finally(() => process.exit(0));
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
      // Also stop when the parent goes away, so no proxy outlives a benchmark server.
      process.on('disconnect', stop);
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
