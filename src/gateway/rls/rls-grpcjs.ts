/** The rate limit service on @grpc/grpc-js (`grpc.server: grpc-js`): the fallback transport, on the same raw-bytes methods. */
/**
 * Messages pass through grpc-js as bytes (identity serializers) and are decoded by the service itself, as on the
 * lean transport, so both answer the same bytes.
 */
import type * as Grpc from '@grpc/grpc-js';
import { loadGrpc } from './grpc-deps.js';
import { hostPort, type Transport, type TransportOptions, type UnaryMethod } from './rls-transport.js';

const bytes = (value: Buffer): Buffer => value;

/** A grpc-js method definition that hands the message's bytes through untouched. */
function rawUnary(path: string): Grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: bytes,
    requestDeserialize: bytes,
    responseSerialize: bytes,
    responseDeserialize: bytes,
  };
}

/**
 * Listens with @grpc/grpc-js and serves `options.methods`, each as a service of one method.
 * @throws MISSING_DEPENDENCY without @grpc/grpc-js; the bind error when the port is taken
 */
export async function listenGrpcJs(options: TransportOptions): Promise<Transport> {
  const grpc = await loadGrpc();
  const server = new grpc.Server({
    // Channelz keeps per-call statistics for a debugging service this server does not offer.
    'grpc.enable_channelz': 0,
    'grpc.max_receive_message_length': options.maxMessageBytes,
    ...(options.maxConnectionAgeMs === undefined
      ? {}
      : {
          'grpc.max_connection_age_ms': options.maxConnectionAgeMs,
          'grpc.max_connection_age_grace_ms': options.maxConnectionAgeGraceMs ?? 10_000,
        }),
  });
  const tls = options.tls;
  const credentials =
    tls === undefined
      ? grpc.ServerCredentials.createInsecure()
      : // checkClientCertificate: with a CA, a client must show a certificate it signed; without one, none is asked for.
        grpc.ServerCredentials.createSsl(tls.ca ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.ca !== undefined);
  const address = hostPort(options.host, options.port);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, credentials, (error, bound) => (error === null ? resolve(bound) : reject(error))),
  );
  for (const [path, method] of options.methods) {
    // A path is /package.Service/Method: grpc-js routes by the definition's path, whatever the service's name.
    const name = path.slice(path.lastIndexOf('/') + 1);
    server.addService({ [name]: rawUnary(path) }, { [name]: handler(method) });
  }
  return {
    port,
    close: (graceMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.forceShutdown(), graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/** A grpc-js unary handler calling `method` with the request's bytes. */
function handler(method: UnaryMethod): Grpc.handleUnaryCall<Buffer, Buffer> {
  return (call, callback) =>
    method(call.request, (failure, message) =>
      failure === null ? callback(null, message ?? Buffer.alloc(0)) : callback({ code: failure.code, details: failure.details }),
    );
}
