/** Text as printable ASCII: what a grpc-message trailer and a Structured Field String can carry. */

/**
 * `text` with every byte of its UTF-8 outside printable ASCII, and `%`, percent-encoded: the encoding gRPC's
 * `grpc-message` prescribes, and an injective one, so two texts never come out alike.
 */
export function printableAscii(text: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(text)) return text;
  let out = '';
  for (const byte of Buffer.from(text, 'utf8'))
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}
