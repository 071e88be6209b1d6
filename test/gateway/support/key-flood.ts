// Floods of requests, one API key each, over a few kept-alive connections: how the tables kept of client keys are attacked.
import { Agent, request } from 'node:http';

/** Sends one request per key (`times` each, key in x-api-key) over `sockets` kept-alive connections; returns the count of each status. */
export async function floodKeys(base: string, keys: readonly string[], times = 1, sockets = 16): Promise<Map<number, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets });
  const statuses = new Map<number, number>();
  const one = (key: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request(`${base}/`, { agent, headers: { 'x-api-key': key } }, (res) => {
        res.resume();
        res.on('end', () => {
          statuses.set(res.statusCode!, (statuses.get(res.statusCode!) ?? 0) + 1);
          resolve();
        });
      });
      req.on('error', reject);
      req.end();
    });
  let next = 0;
  const jobs = keys.flatMap((k) => Array.from({ length: times }, () => k));
  const worker = async (): Promise<void> => {
    while (next < jobs.length) await one(jobs[next++]!);
  };
  await Promise.all(Array.from({ length: sockets }, worker));
  agent.destroy();
  return statuses;
}
