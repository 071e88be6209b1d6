/** The rate limit service's listener credentials. */
/**
 * Plaintext, TLS (a certificate and key), or mutual TLS (clients' certificates checked against a CA), from PEM files
 * read at start.
 */
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import type * as Grpc from '@grpc/grpc-js';
import { ErrorCode } from '../../index.js';
import { ConfigError } from '../config/config-error.js';
import type { GrpcTlsSettings } from '../config/settings.js';
import type { GrpcJs } from './grpc-deps.js';

async function pem(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file, field: what }, `cannot read the file: ${(error as Error).message}`, error);
  }
}

/**
 * The credentials of the gRPC listener. Without `tls`, plaintext (the port
 * must then be reachable by Envoy alone: any caller can spend any
 * descriptor's quota). With `tls.clientCa`, a client without a certificate
 * signed by that CA is refused in the handshake, as envoyproxy/ratelimit's
 * mutual TLS does.
 * @throws ConfigError CONFIG_UNREADABLE for a file that cannot be read; INVALID_CONFIG for PEM data grpc-js refuses
 */
export async function serverCredentials(grpc: GrpcJs, tls: GrpcTlsSettings | undefined): Promise<Grpc.ServerCredentials> {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  const [cert, key, ca] = await Promise.all([
    pem(tls.cert, 'grpc.tls.cert'),
    pem(tls.key, 'grpc.tls.key'),
    tls.clientCa === undefined ? undefined : pem(tls.clientCa, 'grpc.tls.clientCa'),
  ]);
  try {
    // grpc-js reads the PEM only when it binds: node's own parse says now, before anything listens, which file is wrong.
    createSecureContext({ cert, key, ...(ca === undefined ? {} : { ca }) });
  } catch (error) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file: tls.cert, field: 'grpc.tls' },
      `the certificate, key or client CA is not usable PEM: ${(error as Error).message}`,
      error,
    );
  }
  // checkClientCertificate: with a CA, a client must show a certificate it signed; without one, none is asked for.
  return grpc.ServerCredentials.createSsl(ca ?? null, [{ cert_chain: cert, private_key: key }], ca !== undefined);
}
