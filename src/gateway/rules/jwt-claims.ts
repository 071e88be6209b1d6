/** The claims of a request's bearer token, verified with jose as the `jwt:` section says (or decoded, when it opts out). */
/**
 * The signature with the configured key or key set and allowed algorithms, then exp/nbf (with leeway), iss and aud.
 */
import type { JwtSettings } from '../config/settings.js';
import { loadJose } from '../runtime/optional-deps.js';

/** The part of jose used here. */
type Jose = Pick<typeof import('jose'), 'jwtVerify' | 'decodeJwt' | 'createLocalJWKSet'>;

/** A token's claims, or why there are none. */
export type ClaimsAnswer = { readonly claims: Readonly<Record<string, unknown>> } | { readonly invalid: string };

/** Verifies bearer tokens under one `jwt:` section. */
export class JwtClaims {
  /** The key, or the key set's lookup, built once jose is loaded. */
  private key: Parameters<Jose['jwtVerify']>[1] | undefined;

  /** @param settings - the `jwt:` section */
  constructor(private readonly settings: JwtSettings) {}

  /** The claims of `token`: verified (signature, algorithm, exp/nbf, iss, aud), or merely decoded when verification is off. */
  async claimsOf(token: string): Promise<ClaimsAnswer> {
    const verify = this.settings.verify;
    try {
      // The config load already loaded jose (so a missing package stops the start): this resolves from its cache.
      const jose = (await loadJose()) as Jose;
      if (verify === undefined) return { claims: jose.decodeJwt(token) };
      this.key ??=
        verify.key.kind === 'jwks' ? jose.createLocalJWKSet(verify.key.jwks as Parameters<Jose['createLocalJWKSet']>[0]) : verify.key.key;
      const { payload } = await jose.jwtVerify(token, this.key as Parameters<Jose['jwtVerify']>[1], {
        algorithms: [...verify.algorithms],
        clockTolerance: verify.clockToleranceSec,
        ...(verify.issuer === undefined ? {} : { issuer: [...verify.issuer] }),
        ...(verify.audience === undefined ? {} : { audience: [...verify.audience] }),
      });
      return { claims: payload };
    } catch (error) {
      // jose's codes (ERR_JWT_EXPIRED, ERR_JWS_SIGNATURE_VERIFICATION_FAILED, ...) say why, for the log; the client learns only "invalid".
      return { invalid: (error as { code?: string }).code ?? 'ERR_JWT_INVALID' };
    }
  }
}
