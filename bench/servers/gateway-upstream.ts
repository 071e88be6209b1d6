/** The app behind every proxy variant, answering 200 `{}`: forked (port over IPC) or started by the harness. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}');
});
// Started by the harness for a scenario with `upstream: true`, it gets a port; forked by a gateway server, it picks one.
const port = Number(process.env.FLOODGATE_BENCH_PORT ?? 0);
server.listen(port, '127.0.0.1', () => {
  if (process.send) process.send({ port: (server.address() as AddressInfo).port });
  else process.stdout.write('ready\n');
});
// The parent's exit closes the IPC channel; go with it so no upstream outlives a run.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
