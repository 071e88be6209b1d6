// Hand-made HTTP/2 frames and protobuf bytes for the attacks on the rate limit service's transport and codec.
import { connect as netConnect, type Socket } from 'node:net';

// A raw HTTP/2 peer: frames written by hand, so it can do what node's client refuses to (ignore the stream limit,
// reset at once, flood PINGs, send CONTINUATION without end).

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
/** HTTP/2 frame types the attacks write or read. */
export const enum F {
  DATA = 0,
  HEADERS = 1,
  RST_STREAM = 3,
  SETTINGS = 4,
  PING = 6,
  GOAWAY = 7,
  CONTINUATION = 9,
}

/** One HTTP/2 frame. */
export function h2frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an N-bit prefix. */
function hpackInt(n: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (n < max) return Buffer.from([first | n]);
  const out = [first | max];
  n -= max;
  while (n >= 128) {
    out.push((n % 128) + 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** A header block of literals without indexing (no Huffman): what any HPACK decoder must read. */
export function hpack(headers: Array<[string, string]>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    parts.push(Buffer.from([0]), hpackInt(name.length, 7), Buffer.from(name), hpackInt(Buffer.byteLength(value), 7), Buffer.from(value));
  }
  return Buffer.concat(parts);
}

/** A gRPC call's request head, for `path`. */
export const GRPC_HEAD = (path: string): Array<[string, string]> => [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', path],
  [':authority', 'x'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
];

/** A raw HTTP/2 client connection. */
export interface RawPeer {
  socket: Socket;
  /** Frames the server sent, by type. */
  seen: Map<number, number>;
  /** The GOAWAY error code, once received. */
  goaway?: number;
  closed: Promise<void>;
  isClosed: boolean;
  send(buf: Buffer): boolean;
}

/** Connects, sends the preface and an empty SETTINGS, and counts the frames the server sends; `track` collects the socket for cleanup. */
export async function rawPeer(port: number, track: Socket[]): Promise<RawPeer> {
  const socket = netConnect(port, '127.0.0.1');
  track.push(socket);
  socket.on('error', () => {});
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const peer: RawPeer = {
    socket,
    seen: new Map(),
    isClosed: false,
    closed: new Promise((r) => socket.once('close', () => ((peer.isClosed = true), r()))),
    send: (buf) => !socket.destroyed && socket.write(buf),
  };
  let pending = Buffer.alloc(0);
  socket.on('data', (d: Buffer) => {
    pending = Buffer.concat([pending, d]);
    while (pending.length >= 9) {
      const len = pending.readUIntBE(0, 3);
      if (pending.length < 9 + len) break;
      const type = pending[3]!;
      peer.seen.set(type, (peer.seen.get(type) ?? 0) + 1);
      if (type === F.GOAWAY) peer.goaway = pending.readUInt32BE(9 + 4);
      pending = pending.subarray(9 + len);
    }
  });
  peer.send(Buffer.concat([PREFACE, h2frame(F.SETTINGS, 0, 0)]));
  return peer;
}

/** A gRPC message frame: flag, 32-bit length, body. */
export function frame(body: Buffer, flag = 0, length = body.length): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(length, 1);
  return Buffer.concat([head, body]);
}

/** Minimal protobuf writer for hand-made requests. */
export function varint(n: bigint | number): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}
/** Protobuf: tag. */
export const tag = (field: number, wire: number): Buffer => varint((field << 3) | wire);
/** Protobuf: len. */
export const len = (field: number, body: Buffer | string): Buffer => {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([tag(field, 2), varint(b.length), b]);
};
/** Protobuf: entry. */
export const entry = (key: string | Buffer, value: string | Buffer): Buffer =>
  Buffer.concat([len(1, key as Buffer), len(2, value as Buffer)]);
/** Protobuf: descriptor. */
export const descriptor = (...parts: Buffer[]): Buffer => len(2, Buffer.concat(parts));
/** Protobuf: entries. */
export const entries = (...es: Buffer[]): Buffer => Buffer.concat(es.map((e) => len(1, e)));
/** Protobuf: limitOf. */
export const limitOf = (rpu: number, unit: number): Buffer => len(2, Buffer.concat([tag(1, 0), varint(rpu), tag(2, 0), varint(unit)]));
/** Protobuf: addend. */
export const addend = (n: bigint | number): Buffer => len(3, Buffer.concat([tag(1, 0), varint(n)]));
/** Protobuf: request. */
export const request = (domain: string, ...descriptors: Buffer[]): Buffer => Buffer.concat([len(1, domain), ...descriptors]);

/** ShouldRateLimit's path. */
export const SHOULD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
/** Health/Check's path. */
export const HEALTH = '/grpc.health.v1.Health/Check';

/** The RateLimitResponse's overall_code and the statuses' limit_remaining, read by hand. */
export function readResponse(data: Buffer): { overall: number; remaining: number[] } {
  const body = data.subarray(5);
  let pos = 0;
  const rv = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      const b = body[pos++]!;
      n += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) return n;
    }
  };
  const out = { overall: 0, remaining: [] as number[] };
  while (pos < body.length) {
    const t = rv();
    if ((t & 7) === 0) {
      const v = rv();
      if (t >>> 3 === 1) out.overall = v;
    } else if ((t & 7) === 2) {
      const n = rv();
      const end = pos + n;
      if (t >>> 3 === 2) {
        let remaining = 0;
        while (pos < end) {
          const st = rv();
          if ((st & 7) === 0) {
            const v = rv();
            if (st >>> 3 === 3) remaining = v;
          } else if ((st & 7) === 2) {
            const n = rv(); // read before `pos +=` takes pos
            pos += n;
          } else throw new Error(`wire type ${st & 7}`);
        }
        out.remaining.push(remaining);
      }
      pos = end;
    } else throw new Error(`wire type ${t & 7}`);
  }
  return out;
}
