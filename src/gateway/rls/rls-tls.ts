/** The rate limit service's listener TLS files, read and checked before anything listens. */
/**
 * Plaintext, TLS (a certificate and key), or mutual TLS (clients' certificates checked against a CA), from PEM files
 * read at start.
 */
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { ErrorCode } from '../../index.js';
import { ConfigError } from '../config/config-error.js';
import type { GrpcTlsSettings } from '../config/settings.js';
import type { TlsFiles } from './rls-transport.js';

async function pem(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw new ConfigError(ErrorCode.CONFIG_UNREADABLE, { file, field: what }, `cannot read the file: ${(error as Error).message}`, error);
  }
}

/**
 * The TLS material of the gRPC listener. Without `tls`, plaintext (the port
 * must then be reachable by Envoy alone: any caller can spend any
 * descriptor's quota). With `tls.clientCa`, a client without a certificate
 * signed by that CA is refused in the handshake, as envoyproxy/ratelimit's
 * mutual TLS does.
 * @returns undefined for plaintext
 * @throws ConfigError CONFIG_UNREADABLE for a file that cannot be read; INVALID_CONFIG for PEM data node's TLS refuses
 */
export async function readTlsFiles(tls: GrpcTlsSettings | undefined): Promise<TlsFiles | undefined> {
  if (tls === undefined) return undefined;
  const [cert, key, ca] = await Promise.all([
    pem(tls.cert, 'grpc.tls.cert'),
    pem(tls.key, 'grpc.tls.key'),
    tls.clientCa === undefined ? undefined : pem(tls.clientCa, 'grpc.tls.clientCa'),
  ]);
  try {
    // Both transports read the PEM only when they listen: node's own parse says now, before anything listens, which file is wrong.
    createSecureContext({ cert, key, ...(ca === undefined ? {} : { ca }) });
  } catch (error) {
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file: tls.cert, field: 'grpc.tls' },
      `the certificate, key or client CA is not usable PEM: ${(error as Error).message}`,
      error,
    );
  }
  return { cert, key, ...(ca === undefined ? {} : { ca }) };
}
