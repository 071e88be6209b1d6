// key: jwt:CLAIM from the attacker's side: tokens forged every way a client can, against a real gateway verifying with a JWKS file.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { SignJWT, exportJWK, type JWTPayload } from 'jose';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { ruleWarnings } from '../../../src/gateway/rules/rule-warnings.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { get } from '../../http/support/http.js';
import { rejectsConfig } from '../support/config-errors.js';
import { gatewayFixture, writeTemp } from '../support/harness.js';
import { statusOf, type AttackRow } from '../support/key-attacks.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
/** A key the JWKS does not hold, signing under the JWKS key's kid. */
const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'api';
const now = (): number => Math.floor(Date.now() / 1000);

interface Sign {
  readonly key?: KeyObject | Uint8Array;
  readonly alg?: string;
  readonly kid?: string;
  readonly claims?: JWTPayload;
}

/** A token: RS256 by the JWKS's RSA key unless `key`/`alg`/`kid` say otherwise; iss, aud and a 5-minute exp unless `claims` override them. */
async function token(sub: unknown, o: Sign = {}): Promise<string> {
  const payload: JWTPayload = {
    iss: ISSUER,
    aud: AUDIENCE,
    exp: now() + 300,
    ...(sub === undefined ? {} : { sub: sub as string }),
    ...o.claims,
  };
  return new SignJWT(payload).setProtectedHeader({ alg: o.alg ?? 'RS256', kid: o.kid ?? 'rsa-1' }).sign(o.key ?? rsa.privateKey);
}

/** An unsigned token (`alg: none`), written by hand as a forger would. */
function unsigned(payload: Record<string, unknown>): string {
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(payload)}.`;
}

const bearer = (t: string): string => `Authorization: Bearer ${t}`;
const r = (...headers: string[]): { target: string; headers: string[] } => ({ target: '/x', headers });

let ROWS: AttackRow[] = [];

before(async () => {
  const valid = (sub: string): Promise<string> => token(sub);
  const tampered = (await valid('j13')).slice(0, -4) + 'AAAA';
  ROWS = [
    {
      attempt: 'one subject, twice: the second is over the limit',
      requests: [r(bearer(await valid('j1'))), r(bearer(await valid('j1')))],
      expect: [200, 429],
    },
    { attempt: 'two subjects count apart', requests: [r(bearer(await valid('j2a'))), r(bearer(await valid('j2b')))], expect: [200, 200] },
    { attempt: 'no Authorization header', requests: [r()], expect: [401] },
    { attempt: 'another scheme (Basic)', requests: [r('Authorization: Basic dXNlcjpwYXNz')], expect: [401] },
    { attempt: 'Bearer with no token', requests: [r('Authorization: Bearer ')], expect: [401] },
    {
      attempt: 'a lower-case scheme (bearer) is the same scheme',
      requests: [r(`Authorization: bearer ${await valid('j6')}`), r(bearer(await valid('j6')))],
      expect: [200, 429],
    },
    {
      attempt: 'alg none (unsigned, any sub)',
      requests: [r(bearer(unsigned({ sub: 'j7', iss: ISSUER, aud: AUDIENCE, exp: now() + 300 })))],
      expect: [401],
    },
    {
      attempt: 'HS/RS confusion: HS256 keyed with the RSA public key (PEM) under its kid',
      requests: [
        r(bearer(await token('j8', { alg: 'HS256', key: Buffer.from(rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string) }))),
      ],
      expect: [401],
    },
    { attempt: 'expired a minute ago', requests: [r(bearer(await token('j9', { claims: { exp: now() - 60 } })))], expect: [401] },
    {
      attempt: 'expired 2 s ago, within the 5 s leeway',
      requests: [r(bearer(await token('j10', { claims: { exp: now() - 2 } })))],
      expect: [200],
    },
    {
      attempt: 'not valid for another minute (nbf)',
      requests: [r(bearer(await token('j11', { claims: { nbf: now() + 60 } })))],
      expect: [401],
    },
    { attempt: 'another issuer', requests: [r(bearer(await token('j12', { claims: { iss: 'https://evil.example/' } })))], expect: [401] },
    { attempt: 'another audience', requests: [r(bearer(await token('j12b', { claims: { aud: 'other-api' } })))], expect: [401] },
    { attempt: 'a bad signature (its last bytes changed)', requests: [r(bearer(tampered))], expect: [401] },
    {
      attempt: "signed by a key not in the set, under the set's kid",
      requests: [r(bearer(await token('j14', { key: stranger.privateKey })))],
      expect: [401],
    },
    {
      attempt: 'the other key of the set (ES256, its own kid) verifies: the same sub is the same key',
      requests: [r(bearer(await valid('j15'))), r(bearer(await token('j15', { alg: 'ES256', kid: 'ec-1', key: ec.privateKey })))],
      expect: [200, 429],
    },
    {
      attempt: 'an algorithm outside the list (PS256 with the RSA key)',
      requests: [r(bearer(await token('j16', { alg: 'PS256' })))],
      expect: [401],
    },
    {
      attempt: 'a token in two Authorization headers',
      requests: [r(bearer(await valid('j17a')), bearer(await valid('j17b')))],
      expect: [400],
    },
    {
      attempt: 'the same token in two Authorization headers',
      requests: [r(bearer(await valid('j18')), bearer(await valid('j18')))],
      expect: [400],
    },
    { attempt: 'a valid token without the claim (no sub)', requests: [r(bearer(await token(undefined)))], expect: [401] },
    { attempt: 'an empty sub', requests: [r(bearer(await token('')))], expect: [401] },
    { attempt: 'a sub that is an object', requests: [r(bearer(await token({ id: 'j21' })))], expect: [401] },
    {
      attempt: 'a numeric sub counts as its digits',
      requests: [r(bearer(await token(2222))), r(bearer(await token('2222')))],
      expect: [200, 429],
    },
    {
      attempt: 'a 3 000-byte sub is counted (hashed), and again',
      requests: [r(bearer(await valid('j'.repeat(3000) + '23'))), r(bearer(await valid('j'.repeat(3000) + '23')))],
      expect: [200, 429],
    },
    { attempt: 'garbage in place of a token', requests: [r('Authorization: Bearer not.a.jwt')], expect: [401] },
  ];
});

describe('jwt:CLAIM keys, verified with a JWKS file', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    const jwks = writeTemp(
      'jwks.json',
      JSON.stringify({
        keys: [
          { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1' },
          { ...(await exportJWK(ec.publicKey)), kid: 'ec-1' },
        ],
      }),
    );
    g = await fixture.start(`upstream: ${fixture.upstream.url}
jwt:
  jwks: ${jwks}
  algorithms: [RS256, ES256]
  issuer: ${ISSUER}
  audience: ${AUDIENCE}
  clockTolerance: 5s
rules:
  - name: by-subject
    key: jwt:sub
    policies: ["1/1m"]
`);
  });

  // The rows hold signed tokens, so they are made in a hook and run as subtests of one test.
  it('answers every row of the attack table as it says', async (t) => {
    assert.ok(ROWS.length >= 20);
    for (const row of ROWS) {
      await t.test(`${row.attempt} → ${row.expect.join(', ')}`, async () => {
        const got: number[] = [];
        for (const request of row.requests) got.push(await statusOf(g, request));
        assert.deepEqual(got, [...row.expect]);
      });
    }
  });

  it('says Bearer without a token and invalid_token with a bad one, and never forwards either', async () => {
    const seen = fixture.upstream.seen.length;
    const missing = await get(`${g.url}/x`);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'Bearer');
    const bad = await get(`${g.url}/x`, { headers: { authorization: `Bearer ${await token('w1', { claims: { exp: now() - 60 } })}` } });
    assert.equal(bad.status, 401);
    assert.equal(bad.headers['www-authenticate'], 'Bearer error="invalid_token"');
    assert.equal(fixture.upstream.seen.length, seen);
  });
});

describe('jwt:CLAIM keys with a public key or a secret', () => {
  const fixture = gatewayFixture();

  it('a PEM public key verifies RS256 and refuses HS256 signed with that PEM', async () => {
    const pem = writeTemp('issuer.pem', rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string);
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\njwt: { publicKey: ${pem} }\nrules:\n  - { name: a, key: "jwt:org_id", policies: ["1/1m"] }\n`,
    );
    const ask = async (t: string): Promise<number> => (await get(`${g.url}/x`, { headers: { authorization: `Bearer ${t}` } })).status;
    assert.equal(await ask(await token('s1', { claims: { org_id: 'org-1' } })), 200);
    assert.equal(await ask(await token('s2', { claims: { org_id: 'org-1' } })), 429, 'counted by org_id, not sub');
    const confused = await token('s3', { alg: 'HS256', claims: { org_id: 'org-2' }, key: Buffer.from(pem) });
    assert.equal(await ask(confused), 401);
  });

  it('an HMAC secret file verifies HS256', async () => {
    const secret = 'a-shared-secret-of-at-least-32-bytes!!';
    const file = writeTemp('hmac', `${secret}\n`);
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\njwt: { secretFile: ${file} }\nrules:\n  - { name: a, key: jwt:sub, policies: ["1/1m"] }\n`,
    );
    const ask = async (t: string): Promise<number> => (await get(`${g.url}/x`, { headers: { authorization: `Bearer ${t}` } })).status;
    assert.equal(await ask(await token('h1', { alg: 'HS256', key: Buffer.from(secret) })), 200);
    assert.equal(await ask(await token('h1', { alg: 'HS256', key: Buffer.from(secret) })), 429);
    assert.equal(await ask(await token('h2', { alg: 'HS256', key: Buffer.from('another-secret-of-at-least-32-bytes!!') })), 401);
    assert.equal(await ask(await token('h3')), 401, 'RS256 against an HMAC secret');
  });

  it('with dangerouslyUseUnverifiedClaims, a forged token counts under the sub it claims (which is why it warns)', async () => {
    const g = await fixture.start(
      `upstream: ${fixture.upstream.url}\njwt: { dangerouslyUseUnverifiedClaims: true }\nrules:\n  - { name: a, key: jwt:sub, policies: ["1/1m"] }\n`,
    );
    const ask = async (t: string): Promise<number> => (await get(`${g.url}/x`, { headers: { authorization: `Bearer ${t}` } })).status;
    assert.equal(await ask(unsigned({ sub: 'victim' })), 200);
    assert.equal(await ask(await token('victim', { key: stranger.privateKey })), 429);
    assert.equal(await ask('not.a.jwt'), 401);
  });
});

describe('config: jwt keys', () => {
  it('refuses jwt:CLAIM without a jwt section, naming both ways out', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    key: jwt:sub\n    policies: ["1/1m"]\n',
      /^gw\.yaml:3:10: rules\[0\]\.key: counts by a claim of the bearer token, which anyone can write unless it is verified: add a jwt section .*dangerouslyUseUnverifiedClaims: true/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    policies: [{ limit: 1, window: 1m, key: "header:x-api-key + jwt:org_id" }]\n',
      /rules\[0\]\.policies\[0\]\.key: counts by a claim of the bearer token/,
    );
  });

  it('warns once at start of unverified claims, naming the file and line', async () => {
    const s = await parseConfigText(
      'jwt:\n  dangerouslyUseUnverifiedClaims: true\nrules:\n  - { name: a, key: jwt:sub, policies: ["1/1m"] }\n',
      'gw.yaml',
    );
    assert.equal(s.jwt?.verify, undefined);
    const warnings = ruleWarnings(s).filter((w) => w.code === 'FLOODGATE_UNVERIFIED_JWT_CLAIMS');
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]!.message,
      /^gw\.yaml:2 sets dangerouslyUseUnverifiedClaims: jwt:CLAIM keys count by claims no signature vouches for/,
    );
  });

  it('FLOODGATE_JWT_AUDIENCE_UNCHECKED: a key set or public key without an audience is warned of once (a token made for another app would pass); an audience, or an HMAC secret, is not', async () => {
    const jwks = writeTemp('jwks.json', JSON.stringify({ keys: [rsa.publicKey.export({ format: 'jwk' })] }));
    const rule = 'rules:\n  - { name: a, key: jwt:sub, policies: ["1/1m"] }\n';
    const codes = async (jwt: string) =>
      ruleWarnings(await parseConfigText(`jwt: ${jwt}\n${rule}`, 'gw.yaml')).filter((w) => w.code === 'FLOODGATE_JWT_AUDIENCE_UNCHECKED');
    const warned = await codes(`{ jwks: ${jwks} }`);
    assert.equal(warned.length, 1);
    assert.match(warned[0]!.message, /^gw\.yaml:1 verifies bearer tokens against a key set without an audience/);
    assert.match(warned[0]!.message, /issuer: https/);
    assert.deepEqual(await codes(`{ jwks: ${jwks}, audience: https://api.example.com }`), []);
    const secret = writeTemp('secret', 'x'.repeat(40));
    assert.deepEqual(await codes(`{ secretFile: ${secret} }`), []);
  });

  it('refuses alg none, HMAC with a public key, a private key, a short secret, a symmetric JWKS key, and a key with the opt-out', async () => {
    const pem = writeTemp('pub.pem', rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string);
    const priv = writeTemp('priv.pem', rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
    const short = writeTemp('short', 'too-short\n');
    const oct = writeTemp('oct.json', JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }));
    const rule = 'rules:\n  - { name: a, key: jwt:sub, policies: ["1/1m"] }\n';
    await rejectsConfig(
      `jwt:\n  publicKey: ${pem}\n  algorithms: [RS256, none]\n${rule}`,
      /^gw\.yaml:3:\d+: jwt\.algorithms: lists "none": an unsigned token proves nothing/,
    );
    await rejectsConfig(
      `jwt:\n  publicKey: ${pem}\n  algorithms: [HS256]\n${rule}`,
      /jwt\.algorithms: lists HS256, an HMAC algorithm, with a public key/,
    );
    await rejectsConfig(`jwt:\n  publicKey: ${priv}\n${rule}`, /jwt\.publicKey: .* holds a private key/);
    await rejectsConfig(
      `jwt:\n  secretFile: ${short}\n${rule}`,
      /jwt\.secretFile: holds a secret of 9 bytes; an HMAC secret needs at least 32/,
    );
    await rejectsConfig(`jwt:\n  jwks: ${oct}\n${rule}`, /jwt\.jwks: .*keys\[0\] is a symmetric \(oct\) key/);
    await rejectsConfig(
      `jwt:\n  jwks: ${oct}\n  dangerouslyUseUnverifiedClaims: true\n${rule}`,
      /jwt\.dangerouslyUseUnverifiedClaims: and jwks are both set/,
    );
    await rejectsConfig(`jwt:\n  algorithms: [RS256]\n${rule}`, /jwt: needs the key that signs the tokens/);
    await rejectsConfig(
      `jwt:\n  publicKey: ${pem}\n  clockTolerance: 1h\n${rule}`,
      /jwt\.clockTolerance: is the leeway for exp and nbf \(clock drift\), at most 5m/,
    );
    // Regression: 400ms was rounded to no leeway at all, 1500ms to two seconds, without a word.
    await rejectsConfig(`jwt:\n  publicKey: ${pem}\n  clockTolerance: 400ms\n${rule}`, /jwt\.clockTolerance: is in whole seconds/);
  });
});
