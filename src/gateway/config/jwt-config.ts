/** The config file's `jwt:` section: how `jwt:CLAIM` keys verify the bearer token (key files, algorithms, iss, aud). */
/**
 * Key files are read and parsed at load (a bad PEM or JWKS is a config error at its line); without verification a
 * claim is refused as a key unless `dangerouslyUseUnverifiedClaims: true` says otherwise.
 */
import { createPublicKey, createSecretKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { describeValue } from '../../core/describe-value.js';
import { readPemFile, readSecretFile } from './redis-config.js';
import { InvalidValue, parseBoolean, parseMs } from './values.js';
import type { JwtKeySettings, JwtSettings } from './key-settings.js';
import { mapping, type Cursor } from './yaml-cursor.js';

const JWT_FIELDS = [
  'jwks',
  'publicKey',
  'secretFile',
  'algorithms',
  'issuer',
  'audience',
  'clockTolerance',
  'dangerouslyUseUnverifiedClaims',
] as const;

/** The name of the opt-in to unverified claims, as messages quote it. */
export const UNVERIFIED_FIELD = 'dangerouslyUseUnverifiedClaims';

/** HMAC algorithms: a secret shared with the token's issuer. */
const HMAC = ['HS256', 'HS384', 'HS512'];
const RSA = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
const EC: Record<string, string> = { prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' };
/** Every asymmetric algorithm a key set may use. */
const ASYMMETRIC = [...RSA, 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Shortest HMAC secret: RFC 7518 §3.2 asks for a key at least as long as the hash (256 bits for HS256). */
const MIN_SECRET_BYTES = 32;
/** Longest leeway for `exp` and `nbf`: more is a token lifetime, not a clock's drift. */
const MAX_TOLERANCE_MS = 300_000;

/** Parses the `jwt:` section; undefined when absent. */
export function jwtSection(c: Cursor, value: unknown, baseDir: string): JwtSettings | undefined {
  if (value === undefined) return undefined;
  const j = mapping(c, ['jwt'], value, JWT_FIELDS);
  const line = c.lineOf(['jwt']);
  const sources = (['jwks', 'publicKey', 'secretFile'] as const).filter((f) => j[f] !== undefined);
  const unverified = j[UNVERIFIED_FIELD] === undefined ? false : c.at(['jwt', UNVERIFIED_FIELD], () => parseBoolean(j[UNVERIFIED_FIELD]));
  if (unverified) {
    if (sources.length > 0)
      c.fail(['jwt', UNVERIFIED_FIELD], `and ${sources[0]} are both set: with a key the token is verified; remove ${UNVERIFIED_FIELD}.`);
    for (const f of ['algorithms', 'issuer', 'audience', 'clockTolerance'] as const)
      if (j[f] !== undefined)
        c.fail(
          ['jwt', f],
          `applies to verified tokens only, and ${UNVERIFIED_FIELD} verifies nothing; set jwks, publicKey or secretFile instead.`,
        );
    return { verify: undefined, line };
  }
  if (sources.length === 0)
    c.fail(
      ['jwt'],
      `needs the key that signs the tokens: jwks: ./jwks.json (a JSON Web Key Set file), publicKey: ./issuer.pem or secretFile: ./hmac-secret. Without one, anyone can write a token with any claim; to count unverified claims anyway, write ${UNVERIFIED_FIELD}: true.`,
    );
  if (sources.length > 1) c.fail(['jwt', sources[1]!], `and ${sources[0]} are both set; keep one.`);
  const field = sources[0]!;
  const key = c.at(['jwt', field], () => keySettings(field, j[field], baseDir));
  const usable = usableAlgorithms(key);
  const algorithms = j.algorithms === undefined ? usable : c.at(['jwt', 'algorithms'], () => algorithmList(j.algorithms, usable, field));
  const issuer = j.issuer === undefined ? undefined : c.at(['jwt', 'issuer'], () => stringList(j.issuer, 'issuer'));
  const audience = j.audience === undefined ? undefined : c.at(['jwt', 'audience'], () => stringList(j.audience, 'audience'));
  const toleranceMs = j.clockTolerance === undefined ? 5000 : c.at(['jwt', 'clockTolerance'], () => tolerance(j.clockTolerance));
  return { verify: { key, algorithms, issuer, audience, clockToleranceSec: toleranceMs / 1000 }, line };
}

function keySettings(field: 'jwks' | 'publicKey' | 'secretFile', value: unknown, baseDir: string): JwtKeySettings {
  if (typeof value !== 'string' || value === '') throw new InvalidValue(`must be the path of a file; got ${describeValue(value)}.`);
  const file = isAbsolute(value) ? value : resolve(baseDir, value);
  if (field === 'secretFile') {
    const secret = Buffer.from(readSecretFile(value, baseDir, 'HMAC secret'), 'utf8');
    if (secret.length < MIN_SECRET_BYTES)
      throw new InvalidValue(
        `holds a secret of ${secret.length} bytes; an HMAC secret needs at least ${MIN_SECRET_BYTES} (a shorter one can be guessed offline from any token).`,
      );
    return { kind: 'secret', key: createSecretKey(secret), file };
  }
  if (field === 'publicKey') {
    const pem = readPemFile(value, baseDir);
    if (pem.includes('PRIVATE KEY-----'))
      throw new InvalidValue(`${JSON.stringify(file)} holds a private key; give the gateway the issuer's public key only.`);
    let key: KeyObject;
    try {
      key = createPublicKey(pem);
    } catch (error) {
      throw new InvalidValue(`${JSON.stringify(file)} holds no public key or certificate: ${(error as Error).message}`);
    }
    return { kind: 'public', key, file };
  }
  return { kind: 'jwks', jwks: readJwks(file), file };
}

/** Reads a JWKS file: public keys only, each one that node can import. */
function readJwks(file: string): { keys: Array<Record<string, unknown>> } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new InvalidValue(`cannot read ${JSON.stringify(file)} as JSON: ${(error as Error).message}`);
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0)
    throw new InvalidValue(`${JSON.stringify(file)} is not a JSON Web Key Set: it needs { "keys": [ ... ] } with at least one key.`);
  keys.forEach((jwk: unknown, i) => {
    const k = jwk as Record<string, unknown>;
    if (typeof jwk !== 'object' || jwk === null) throw new InvalidValue(`${JSON.stringify(file)}: keys[${i}] is not a JSON object.`);
    if (k.kty === 'oct')
      throw new InvalidValue(
        `${JSON.stringify(file)}: keys[${i}] is a symmetric (oct) key; a key set holds public keys (use secretFile for HMAC).`,
      );
    if (k.d !== undefined)
      throw new InvalidValue(`${JSON.stringify(file)}: keys[${i}] is a private key; the set must hold public keys only.`);
    try {
      createPublicKey({ key: k as import('node:crypto').JsonWebKey, format: 'jwk' });
    } catch (error) {
      throw new InvalidValue(`${JSON.stringify(file)}: keys[${i}] is not a usable public key: ${(error as Error).message}`);
    }
  });
  return { keys: keys as Array<Record<string, unknown>> };
}

/** The algorithms a key can verify: HMAC for a secret, by key type for a public key, every asymmetric one for a set. */
function usableAlgorithms(key: JwtKeySettings): string[] {
  if (key.kind === 'secret') return HMAC;
  if (key.kind === 'jwks') return ASYMMETRIC;
  const type = key.key.asymmetricKeyType;
  if (type === 'rsa') return RSA;
  if (type === 'rsa-pss') return RSA.filter((a) => a.startsWith('PS'));
  if (type === 'ec') {
    const alg = EC[key.key.asymmetricKeyDetails?.namedCurve ?? ''];
    if (alg !== undefined) return [alg];
  }
  if (type === 'ed25519') return ['EdDSA', 'Ed25519'];
  throw new InvalidValue(`${JSON.stringify(key.file)} holds a ${type ?? 'unknown'} key, which signs no JWT algorithm floodgate accepts.`);
}

function algorithmList(value: unknown, usable: readonly string[], field: string): string[] {
  const list = stringList(value, 'algorithms');
  for (const alg of list) {
    if (alg.toLowerCase() === 'none') throw new InvalidValue('lists "none": an unsigned token proves nothing; remove it.');
    if (!usable.includes(alg))
      throw new InvalidValue(
        HMAC.includes(alg) && field !== 'secretFile'
          ? `lists ${alg}, an HMAC algorithm, with a public key: a token signed with the public key as the HMAC secret would pass; HMAC needs secretFile.`
          : `lists ${JSON.stringify(alg)}, which the ${field} given cannot verify; it can verify ${usable.join(', ')}.`,
      );
  }
  return list;
}

function stringList(value: unknown, what: string): string[] {
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0 || !list.every((s) => typeof s === 'string' && s !== ''))
    throw new InvalidValue(`must be a string or a list of strings (the accepted ${what} values); got ${describeValue(value)}.`);
  return list as string[];
}

function tolerance(value: unknown): number {
  const ms = parseMs(value, true);
  if (ms > MAX_TOLERANCE_MS)
    throw new InvalidValue(`is the leeway for exp and nbf (clock drift), at most 5m; got ${describeValue(value)}.`);
  // exp and nbf are whole seconds, and so is jose's leeway: 400ms would silently be none, 1500ms two seconds.
  if (ms % 1000 !== 0) throw new InvalidValue(`is in whole seconds, as exp and nbf are (e.g. 5s); got ${describeValue(value)}.`);
  return ms;
}
