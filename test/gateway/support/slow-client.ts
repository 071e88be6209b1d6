// Raw-socket clients that try to hold a listener: a connection that records what it is sent, bytes trickled until it is cut, and an endless chunked body.
import { connect, type Socket } from 'node:net';

/** A raw connection, what it has been sent back so far, and its close. */
export interface RawConnection {
  socket: Socket;
  reply: () => string;
  closed: Promise<void>;
}

/** Opens a raw connection to `base`'s port on 127.0.0.1, recording what comes back as latin1. */
export function open(base: string): RawConnection {
  const socket = connect(Number(new URL(base).port), '127.0.0.1');
  let reply = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (reply += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, reply: () => reply, closed };
}

/** Writes one byte (`x`) every `everyMs` until the server closes the connection: a head or body that never ends, but never idles. */
export async function trickleUntilClosed(c: RawConnection, everyMs: number): Promise<void> {
  const timer = setInterval(() => c.socket.writable && c.socket.write('x'), everyMs);
  try {
    await c.closed;
  } finally {
    clearInterval(timer);
  }
}

/** Writes chunks of a chunked body as fast as the socket takes them until it closes or `limit` bytes went; returns the bytes written. */
export async function pour(socket: Socket, closed: Promise<void>, limit: number): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
  let sent = 0;
  let done = false;
  void closed.then(() => (done = true));
  while (!done && sent < limit) {
    const more = socket.write(frame);
    sent += chunk.length;
    if (!more) await Promise.race([new Promise((r) => socket.once('drain', r)), closed]);
  }
  return sent;
}
