/** The proxy port's listening sockets: one, or several bound with SO_REUSEPORT where the runtime offers it. */
/**
 * Node.js accepts one connection per event-loop iteration on a listening socket, so a storm of new connections into a
 * busy process waits for hundreds of iterations; each socket of a `reusePort` group is accepted from on its own.
 */
import type { Server } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { listen } from './listeners.js';
import type { ListenAddress } from '../config/settings.js';

/** Whether this runtime binds listening sockets with SO_REUSEPORT (`reusePort`: Node.js 22.12+ and 23.1+, on Linux). */
export function reusePortAvailable(platform: string = process.platform, version: string = process.versions.node): boolean {
  if (platform !== 'linux') return false;
  const [major, minor] = version.split('.').map(Number) as [number, number];
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

/** `proxy.listenSockets: auto`: the sockets a single gateway process opens on its port when the runtime allows several. */
export const AUTO_LISTEN_SOCKETS = 4;

/**
 * The proxy listener's sockets. The first is the HTTP server's own; each
 * other one is a plain socket of the same `reusePort` group that hands the
 * connections it accepts to the HTTP server, so they are served, tracked
 * and drained as its own. `proxy.maxConnections` holds across all of them:
 * the HTTP server's own cap is lowered by the connections the others hold,
 * and the others refuse a connection past the total.
 */
export class ListenSockets {
  private readonly others: NetServer[] = [];
  /** Connections open that the HTTP server's own socket accepted, and that the others accepted. */
  private own = 0;
  private handedOn = 0;
  private readonly fromOthers = new WeakSet<Socket>();

  /**
   * @param server - the proxy's HTTP server
   * @param count - sockets to open on the port (1: the HTTP server's own only)
   * @param maxConnections - `proxy.maxConnections`
   */
  constructor(
    private readonly server: Server,
    private readonly count: number,
    private maxConnections: number,
  ) {
    if (count > 1) {
      server.on('connection', (socket: Socket) => {
        if (this.fromOthers.has(socket)) return;
        // Node reads a cap of 0 as none: with every connection held by the other sockets, refuse here.
        if (this.own + this.handedOn >= this.maxConnections) {
          socket.destroy();
          return;
        }
        this.own += 1;
        socket.once('close', () => (this.own -= 1));
      });
    }
    this.applyCap();
  }

  /** Listens on `address` with every socket; a failure names the setting `what` and closes what was opened. */
  async listen(address: ListenAddress, what: string): Promise<void> {
    if (this.count === 1) {
      await listen(this.server, address, what);
      return;
    }
    // SO_REUSEPORT would let this group join another process's group on the port (a gateway never stopped, a
    // second config given the same port) and split the traffic with it: the port must first be bound alone.
    // Port 0 picks the port there; the group then takes that one.
    const probe = createNetServer();
    await listen(probe, address, what);
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    await listen(this.server, address, what, { port, reusePort: true });
    try {
      for (let i = 1; i < this.count; i += 1) {
        const other = createNetServer({ noDelay: true }, (socket) => this.handOn(socket));
        this.others.push(other);
        await listen(other, address, what, { port, reusePort: true });
      }
    } catch (error) {
      this.close();
      this.server.close();
      throw error;
    }
  }

  /** Applies a new `proxy.maxConnections` (a reload). */
  setMaxConnections(maxConnections: number): void {
    this.maxConnections = maxConnections;
    this.applyCap();
  }

  /** Stops accepting on the other sockets (the HTTP server's own is closed by its owner). */
  close(): void {
    for (const other of this.others) if (other.listening) other.close();
  }

  private handOn(socket: Socket): void {
    if (this.own + this.handedOn >= this.maxConnections) {
      socket.destroy();
      return;
    }
    this.fromOthers.add(socket);
    this.handedOn += 1;
    this.applyCap();
    socket.once('close', () => {
      this.handedOn -= 1;
      this.applyCap();
    });
    this.server.emit('connection', socket);
  }

  /** The HTTP server refuses at accept once its own connections reach what the others leave of the total. */
  private applyCap(): void {
    this.server.maxConnections = Math.max(1, this.maxConnections - this.handedOn);
  }
}

/**
 * The sockets to open for `proxy.listenSockets`: `auto` is
 * {@link AUTO_LISTEN_SOCKETS} where the runtime binds with SO_REUSEPORT and
 * the process is not a `--workers` worker (node:cluster hands those their
 * connections from the primary), else 1. A number above 1 where it cannot
 * apply is 1, with `warn` saying why.
 */
export function listenSocketCount(
  value: number | 'auto',
  clustered: boolean,
  warn: (message: string) => void,
  available = reusePortAvailable(),
): number {
  if (value === 'auto') return available && !clustered ? AUTO_LISTEN_SOCKETS : 1;
  if (value === 1) return 1;
  if (clustered) {
    warn(
      `proxy.listenSockets ${value} applies to one process: under --workers node:cluster's primary accepts every connection and hands them out; listening on one socket per worker.`,
    );
    return 1;
  }
  if (!available) {
    warn(
      `proxy.listenSockets ${value} needs SO_REUSEPORT listening sockets (Node.js 22.12 or later, on Linux); this is Node.js ${process.versions.node} on ${process.platform}, so the port has one socket.`,
    );
    return 1;
  }
  return value;
}
