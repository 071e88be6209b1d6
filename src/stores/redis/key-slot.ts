/** Redis Cluster's key-to-slot function (CRC16/XMODEM of the key or its hash tag, mod 16384). */
/**
 * So a composite can be checked before it is sent.
 */

/** Slots in a Redis Cluster. */
const CLUSTER_SLOTS = 16384;

// CRC16/XMODEM (polynomial 0x1021, initial value 0), the variant the Redis Cluster specification names.
const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  TABLE[i] = crc;
}

/** CRC16/XMODEM of `bytes` (check value: "123456789" → 0x31c3). */
export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/**
 * The hash tag Redis Cluster hashes `key` by, or undefined when it hashes the
 * whole key: the text between the first `{` and the first `}` after it, when
 * that text is not empty.
 */
export function clusterHashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open === -1) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return undefined;
  return key.slice(open + 1, close);
}

/**
 * The Cluster slot of a Redis key, as `CLUSTER KEYSLOT` answers: CRC16 of its
 * hash tag (or of the whole key without one) mod 16384, over the UTF-8 bytes
 * the clients send.
 */
export function keySlot(key: string): number {
  const hashed = clusterHashTag(key) ?? key;
  return crc16(Buffer.from(hashed, 'utf8')) % CLUSTER_SLOTS;
}
