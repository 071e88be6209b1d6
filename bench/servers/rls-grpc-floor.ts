/** The rls scenario's floor: @grpc/grpc-js answering ShouldRateLimit with one constant, pre-encoded message and no decision, so the table shows what the gRPC layer alone costs per call. */
import grpc from '@grpc/grpc-js';
import { benchEnv, runServer } from '../lib/serve.js';

/** RateLimitResponse { overall_code: OK }: field 1, varint 1. */
const OK = Buffer.from([0x08, 0x01]);

runServer(async () => {
  const env = benchEnv();
  const server = new grpc.Server({ 'grpc.enable_channelz': 0 });
  const same = <T>(value: T): T => value;
  server.addService(
    {
      ShouldRateLimit: {
        path: '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        requestStream: false,
        responseStream: false,
        requestSerialize: same<Buffer>,
        requestDeserialize: same<Buffer>,
        responseSerialize: same<Buffer>,
        responseDeserialize: same<Buffer>,
      },
    },
    {
      // The request's bytes are taken as they come (not decoded), the answer is the same for every call.
      ShouldRateLimit: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => callback(null, OK),
    },
  );
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${env.port}`, grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())),
  );
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => server.forceShutdown());
});
