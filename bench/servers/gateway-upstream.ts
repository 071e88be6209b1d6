/** The app service behind every gateway variant: a child process answering 200 `{}`; it reports its port to the parent over IPC. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}');
});
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
// The parent's exit closes the IPC channel; go with it so no upstream outlives a run.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
