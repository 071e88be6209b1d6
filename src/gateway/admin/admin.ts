/** The admin endpoints (/metrics, /healthz, /readyz) and the admin listener. */
/**
 * /metrics is Prometheus text; /healthz answers while the process runs; /readyz answers ready when not draining, the
 * store tried and, where it counts, connected and not failing, and with readiness.upstream the upstream accepting
 * connections. The admin listener tries the admin API first and closes a connection whose body is still coming after
 * its answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { writeResponse } from '../../http/index.js';
import type { AdminApi } from './admin-api.js';
import { adminHostAllowed } from './admin-hosts.js';
import type { Dashboard } from './dashboard.js';

/** What the admin endpoints ask the gateway. */
export interface AdminSource {
  /** Renders the metrics (an aggregated registry under `--workers`). */
  renderMetrics(): Promise<{ contentType: string; body: string }>;
  /** Why the gateway is not ready, or undefined when it is (asked of every worker under `--workers`). */
  notReady(): string | undefined | Promise<string | undefined>;
}

/** An {@link AdminSource} metrics function over one prom-client registry. */
export function registryMetrics(registry: Registry): AdminSource['renderMetrics'] {
  return async () => ({ contentType: registry.contentType, body: await registry.metrics() });
}

/**
 * Answers `path` if it is an admin endpoint (`/metrics`, `/healthz`,
 * `/readyz`); returns false otherwise so the caller can go on.
 */
export function handleAdmin(path: string, req: IncomingMessage, res: ServerResponse, source: AdminSource): boolean {
  switch (path) {
    case '/metrics':
      source.renderMetrics().then(
        ({ contentType, body }) => send(res, 200, contentType, body),
        (error: unknown) => send(res, 500, 'text/plain; charset=utf-8', `metrics failed: ${(error as Error).message}\n`),
      );
      return true;
    case '/healthz':
      send(res, 200, 'application/json', '{"status":"ok"}\n');
      return true;
    case '/readyz': {
      const answer = (reason: string | undefined): void => {
        if (reason === undefined) send(res, 200, 'application/json', '{"status":"ready"}\n');
        else send(res, 503, 'application/json', `${JSON.stringify({ status: 'not ready', reason })}\n`);
      };
      const reason = source.notReady();
      if (reason instanceof Promise) reason.then(answer, (error: unknown) => answer(`readiness check failed: ${(error as Error).message}`));
      else answer(reason);
      return true;
    }
    default:
      void req;
      return false;
  }
}

/** The admin listener's request handler: 421 for a Host not in `hosts` (when given), then the dashboard (when given), the admin API under /admin/ (when `api` is given), then the endpoints above, else 404; a request with a body has its connection closed after the answer. */
export function adminListener(
  source: AdminSource,
  api: AdminApi | undefined,
  dashboard?: Dashboard,
  hosts?: readonly string[],
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (mayHaveBody(req)) closeAfterAnswer(req, res);
    if (hosts !== undefined && !adminHostAllowed(req.headers.host, hosts)) {
      // 421: this server does not answer for that name (a DNS-rebinding page sends its own).
      writeResponse(
        res,
        421,
        [],
        'text/plain; charset=utf-8',
        'this admin listener does not answer for that Host; its names are set in admin.hosts\n',
      );
      return;
    }
    if (dashboard?.handle(req, res) === true) return;
    if (api?.handle(req, res) === true) return;
    const path = (req.url ?? '/').split('?')[0]!;
    if (!handleAdmin(path, req, res, source))
      writeResponse(res, 404, [], 'text/plain; charset=utf-8', 'not found; try /metrics, /healthz or /readyz\n');
  };
}

/** How long the connection of an answer sent before its body was read stays open, unread, before it is cut. */
const LINGER_MS = 1_000;

/**
 * Closes the connection of a request with a body after its answer. Most
 * answers here come before a body is read (a 401 always does), and node
 * would then read and drop the rest to keep the connection: an endless body,
 * fast or trickled, would hold it and a core until the request timeout. So
 * the answer says `Connection: close`, and if the body is still coming the
 * connection is no longer read, and cut a moment later rather than at once:
 * a cut with unread data resets the connection, and a reset can take the
 * answer with it before the client has read it.
 */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.shouldKeepAlive = false;
  // Runs after node's own handler, which has just asked the socket to be destroyed once the answer is written.
  res.once('finish', () => {
    if (req.complete) return;
    const socket = req.socket;
    socket.removeListener('finish', socket.destroy);
    socket.pause();
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  });
}

/** Whether a request announces a body (a chunked one, or a length over zero). */
function mayHaveBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
  res.end(body);
}
