/** The proxy listener's graceful drain. */
/**
 * Stop accepting, answer every request that reaches a socket with `Connection: close`, and close idle connections only
 * when their keep-alive time runs out.
 */
import type { Server } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * Tracks the proxy listener's HTTP connections (upgraded ones leave: they
 * are tunnels, with no request boundary to wait for) so the drain knows
 * when the last one has gone.
 */
export class ConnectionDrain {
  private readonly open = new Set<Socket>();
  private emptied: (() => void) | undefined;

  constructor(private readonly server: Server) {
    server.on('connection', (socket: Socket) => {
      this.open.add(socket);
      socket.once('close', () => this.leave(socket));
    });
    // A second 'upgrade' listener: the gateway's own takes the socket over; this one only stops waiting for it.
    server.on('upgrade', (_req: unknown, socket: Socket) => this.leave(socket));
  }

  /** HTTP connections open now. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Stops accepting and waits until every HTTP connection has closed, or
   * `timeoutMs` passes; returns how many were still open then.
   *
   * Idle keep-alive connections are not closed here: a client may have
   * written its next request a moment ago, and closing would reset it
   * unanswered. Each connection instead ends after its next response (the
   * caller marks responses `Connection: close` while draining), or when
   * its keep-alive timeout lapses, which the client was told of.
   */
  async drain(timeoutMs: number): Promise<number> {
    // http.Server.close() also closes idle connections (Node 19+); net's close only stops accepting.
    NetServer.prototype.close.call(this.server);
    if (this.open.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => (this.emptied = resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
      this.emptied = undefined;
    }
    return this.open.size;
  }

  private leave(socket: Socket): void {
    if (!this.open.delete(socket)) return;
    if (this.open.size === 0) this.emptied?.();
  }
}
