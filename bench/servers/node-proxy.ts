/** The forwarding scenario's floor for Node.js: the simplest correct reverse proxy, node:http + an undici Pool. */
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { pipeline } from 'node:stream';
import { Pool } from 'undici';
import { benchEnv, runServer, serve } from '../lib/serve.js';
import { startUpstream } from '../lib/upstream.js';

/** RFC 9110 §7.6.1: meaningful for one connection only, never forwarded (undici also refuses most of them). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** `headers` without the hop-by-hop fields. */
function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const kept: OutgoingHttpHeaders = {};
  for (const name in headers) if (!HOP_BY_HOP.has(name)) kept[name] = headers[name];
  return kept;
}

runServer(async () => {
  const env = benchEnv();
  const upstream = await startUpstream();
  // Keep-alive connections to the upstream, reused across requests (undici's default).
  const pool = new Pool(upstream, { connections: 64 });
  const server = createServer((req, res) => {
    const bodyless = req.method === 'GET' || req.method === 'HEAD';
    pool
      .request({
        path: req.url ?? '/',
        method: req.method as 'GET',
        headers: endToEnd(req.headers) as Record<string, string>,
        body: bodyless ? null : req,
      })
      .then(
        (answer) => {
          res.writeHead(answer.statusCode, endToEnd(answer.headers));
          pipeline(answer.body, res, () => {});
        },
        () => {
          if (!res.headersSent) res.writeHead(502).end();
          else res.destroy();
        },
      );
  });
  serve(server, env.port, () => pool.close());
});
