// Sends bytes exactly as written over a TCP socket (nothing normalises the target client-side) and reads the status lines of the answers.
import { connect } from 'node:net';

/** What came back: every status code seen (pipelined requests give several), and the raw text. */
export interface RawReply {
  readonly statuses: number[];
  readonly text: string;
}

/** Writes `bytes` to `base`'s port, then reads until the server closes or `timeoutMs` passes. */
export function sendRaw(base: string, bytes: string, timeoutMs = 3000): Promise<RawReply> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes, 'latin1'));
    let text = '';
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      const statuses = [...text.matchAll(/^HTTP\/1\.[01] (\d{3})/gm)].map((m) => Number(m[1]));
      resolve({ statuses, text });
    };
    const timer = setTimeout(done, timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('close', done);
    socket.on('error', done);
  });
}

/** A request with `Host` and `Connection: close` after `line` and `headers` (each `Name: value`). */
export function requestBytes(line: string, headers: readonly string[] = [], host = 'api.example.com'): string {
  return `${line}\r\nHost: ${host}\r\n${headers.map((h) => `${h}\r\n`).join('')}Connection: close\r\n\r\n`;
}
