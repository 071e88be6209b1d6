// Proxied requests from a chosen loopback address (127.0.0.2, 127.0.0.3, ...): on Linux the whole of 127.0.0.0/8 is local, so one test can play several clients with addresses of their own.
import { request } from 'node:http';

/** The status of `GET path` sent to `base` from `localAddress`, with `headers`. */
export function statusFrom(base: string, localAddress: string, headers: Record<string, string> = {}, path = '/x'): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers, localAddress, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${path} from ${localAddress} hung`)));
    req.on('error', reject);
    req.end();
  });
}
