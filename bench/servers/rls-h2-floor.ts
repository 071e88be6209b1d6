/** The rls scenario's second floor: node:http2 answering ShouldRateLimit with one constant gRPC message and no gRPC library, what a lean unary path could cost per call. */
import { constants, createServer, type ServerHttp2Stream } from 'node:http2';
import { benchEnv, runServer } from '../lib/serve.js';

/** A gRPC message frame (uncompressed flag, 4-byte big-endian length) holding RateLimitResponse { overall_code: OK }. */
const OK_FRAME = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** Answers one call: reads the request's frames to the end (not decoded), then the head, the constant message and grpc-status 0. */
function answer(stream: ServerHttp2Stream, path: string | undefined): void {
  // A load generator that closes its connections at the end resets the streams in flight: nothing to answer.
  stream.on('error', () => {});
  stream.on('data', () => {});
  stream.once('end', () => {
    if (stream.destroyed) return;
    if (path !== PATH) {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
      return;
    }
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(OK_FRAME);
  });
}

runServer(async () => {
  const env = benchEnv();
  const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
  server.on('session', (session) => session.on('error', () => {}));
  server.on('stream', (stream, headers) => answer(stream, headers[constants.HTTP2_HEADER_PATH] as string | undefined));
  await new Promise<void>((resolve) => server.listen(env.port, '127.0.0.1', resolve));
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => server.close());
});
