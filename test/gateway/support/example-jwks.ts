// A JSON Web Key Set for config examples that name ./jwks.json (docs/gateway.md "Keys from the request").
import { generateKeyPairSync } from 'node:crypto';

/** A key set of one EC public key, as an issuer publishes it. */
export function exampleJwks(): string {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'example-1', use: 'sig' }] });
}
