/** The live dashboard on the admin listener. */
/**
 * `GET /admin/dashboard` (the page, which holds no data and so needs no token) and `GET /admin/stats` (its numbers,
 * behind the admin token).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { GatewayStore } from '../rules/key-tables.js';
import { type AdminApiSource, bearerMatches } from './admin-api.js';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE, dashboardHtml } from './dashboard-page.js';
import { dashboardStats, type DashboardStats } from './dashboard-stats.js';

/** Where the page is served. */
const DASHBOARD_PATH = '/admin/dashboard';
/** Where the page reads its numbers. */
const STATS_PATH = '/admin/stats';

const hash = (text: string): string => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * Only the page's own inline script and style may run, it may talk to this
 * listener alone, and no other site may frame it: its buttons reset keys,
 * so a page that framed it could trick an operator into clicking them.
 */
const POLICY = [
  "default-src 'none'",
  `script-src ${hash(DASHBOARD_SCRIPT)}`,
  `style-src ${hash(DASHBOARD_STYLE)}`,
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = dashboardHtml();

/** Serves the dashboard's two paths; every other path is left to the admin API and the admin endpoints. */
export class Dashboard {
  /**
   * @param token - the admin token the stats need (the admin API's)
   * @param stats - reads the numbers: this process's, or under `--workers` every worker's, summed by the primary
   */
  constructor(
    private readonly token: string,
    private readonly stats: () => Promise<DashboardStats>,
  ) {}

  /** Answers `req` when its path is the page or the stats (true), or leaves it to the caller (false). */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== DASHBOARD_PATH && path !== STATS_PATH) return false;
    // As in the admin API, the token comes first for the data: without it, not even a wrong method is told.
    if (path === STATS_PATH && !bearerMatches(req.headers.authorization, this.token)) {
      sendJson(res, 401, 'missing or wrong bearer token: send Authorization: Bearer <admin token>.', {
        'WWW-Authenticate': 'Bearer realm="floodgate admin"',
      });
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendJson(res, 405, `use GET here; got ${req.method ?? 'no method'}.`, { Allow: 'GET, HEAD' });
      return true;
    }
    if (path === DASHBOARD_PATH) {
      send(res, 200, 'text/html; charset=utf-8', PAGE, {
        'Content-Security-Policy': POLICY,
        'X-Frame-Options': 'DENY',
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
      });
      return true;
    }
    this.stats().then(
      (stats) => send(res, 200, 'application/json', `${JSON.stringify(stats)}\n`),
      (error: unknown) => sendJson(res, 500, `internal error: ${(error as Error).message}`),
    );
    return true;
  }
}

/**
 * The dashboard of a gateway's admin listener, or undefined without an admin
 * token: the page is worthless without its numbers, and those need the token.
 */
export function dashboardFor(
  token: string | undefined,
  registry: Registry,
  admin: AdminApiSource,
  store: Pick<GatewayStore, 'description' | 'ready'>,
): Dashboard | undefined {
  if (token === undefined) return undefined;
  return new Dashboard(token, statsOf(registry, admin, store));
}

/** Reads the dashboard's numbers of this process: its registry, its rules and limited keys, its store. */
export function statsOf(
  registry: Registry,
  admin: AdminApiSource,
  store: Pick<GatewayStore, 'description' | 'ready'>,
): () => Promise<DashboardStats> {
  return () => dashboardStats({ registry, admin, store: () => ({ description: store.description, connected: store.ready() }) });
}

function sendJson(res: ServerResponse, status: number, error: string, headers: Record<string, string> = {}): void {
  send(res, status, 'application/json', `${JSON.stringify({ error })}\n`, headers);
}

function send(res: ServerResponse, status: number, contentType: string, body: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    ...headers,
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
