/** The admin API on the admin listener. */
/**
 * Bearer-token checks, then JSON endpoints to list the rules, inspect, reset, block and unblock one key (under a rule,
 * or one of its policies), and list the most-limited keys.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isStoreFailure } from '../../index.js';
import { type LimitedKeys, LIMITED_MINUTES } from './limited-keys.js';
import { ruleView } from './admin-rules.js';
import { allow, ApiError, badField, decode, readJson, sendJson, type AdminRequest } from './admin-http.js';
import { keyAction, namedTarget, ruleLevelTargets, type KeyRule } from './admin-keys.js';
import { plansView, routeOverrides, type OverrideAdmin } from './admin-overrides.js';

/** Where the admin API's paths start; room is left beside `rules` and `limited` for more resources. */
const ADMIN_API_PREFIX = '/admin/';

/** Keys per rule `/admin/limited` lists when `top` is not given. */
export const LIMITED_TOP_DEFAULT = 20;
/** Most keys per rule `/admin/limited?top=` asks for. */
export const LIMITED_TOP_MAX = 100;

/** One loaded rule: its settings, the limiters of its policies (in the same order) and its overrides. */
export type AdminRule = KeyRule;

/** What the admin API reads from the running gateway. */
export interface AdminApiSource {
  /** The rules in force now (they change on reload). */
  rules(): readonly AdminRule[];
  /** The refusals of the last minutes. */
  readonly limited: LimitedKeys;
  /** Plans, and writes to rules' override hashes; undefined: no plans, overrides change this process only. */
  readonly overrides?: OverrideAdmin;
  /** Told after a reset or unblock of `key` under `rule`, so other hosts can drop their in-memory block of it. */
  changed?(rule: string, key: string): void;
}

/** Checks `Authorization: Bearer <token>` in constant time: both sides are hashed first, so neither length nor prefix leaks. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = header === undefined ? null : /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  const given = createHash('sha256')
    .update(m?.[1] ?? '')
    .digest();
  const wanted = createHash('sha256').update(token).digest();
  return timingSafeEqual(given, wanted) && m !== null;
}

/** One answer of the admin API: its status, its JSON body and any headers of its own (`Allow`, `WWW-Authenticate`). */
export interface AdminAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string> | undefined;
}

/**
 * Answers a request that passed the token check: this process's
 * {@link AdminRoutes}, or under `--workers` the primary asking every worker.
 * Never rejects: a failure is an answer (503, 500).
 */
export type AdminAnswerer = (req: IncomingMessage, path: string, query: URLSearchParams) => Promise<AdminAnswer>;

/**
 * The admin API's HTTP side. {@link handle} answers every path under
 * `/admin/`: 404 when no token is configured, 401 without the right bearer
 * token, else what the answerer says.
 */
export class AdminApi {
  /**
   * @param token - the bearer token; undefined leaves the API off
   * @param answer - answers the requests that pass the token check
   */
  constructor(
    private readonly token: string | undefined,
    private readonly answer: AdminAnswerer,
  ) {}

  /** The API over this process's rules (see {@link AdminRoutes}). */
  static local(token: string | undefined, source: AdminApiSource): AdminApi {
    const routes = new AdminRoutes(source);
    return new AdminApi(token, (req, path, query) => routes.answer({ method: req.method, json: () => readJson(req) }, path, query));
  }

  /** Answers `req` when its path is under `/admin/` (true), or leaves it to the caller (false). */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const raw = req.url ?? '/';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    if (path !== '/admin' && !path.startsWith(ADMIN_API_PREFIX)) return false;
    if (this.token === undefined) {
      sendJson(res, 404, {
        error:
          'the admin API is off: give the admin listener a token (admin: { listen: HOST:PORT, tokenFile: FILE } or --admin-token-file FILE).',
      });
      return true;
    }
    if (!bearerMatches(req.headers.authorization, this.token)) {
      sendJson(
        res,
        401,
        { error: 'missing or wrong bearer token: send Authorization: Bearer <admin token>.' },
        {
          'WWW-Authenticate': 'Bearer realm="floodgate admin"',
        },
      );
      return true;
    }
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    this.answer(req, path, query).then(
      ({ status, body, headers }) => sendJson(res, status, body, headers),
      (error: unknown) => sendJson(res, 500, { error: `internal error: ${(error as Error).message}` }),
    );
    return true;
  }
}

/**
 * The admin API's endpoints over one process's rules: what a request asks,
 * answered from `source`.
 */
export class AdminRoutes {
  /** @param source - the running gateway */
  constructor(private readonly source: AdminApiSource) {}

  /** The answer to `req` at `path` (under `/admin/`) with `query`; a failure becomes its answer (4xx, 503 for the store, 500). */
  async answer(req: AdminRequest, path: string, query: URLSearchParams): Promise<AdminAnswer> {
    try {
      const [status, body] = await this.route(req, path, query);
      return { status, body };
    } catch (error) {
      if (error instanceof ApiError) return { status: error.status, body: error.body, headers: error.headers };
      if (isStoreFailure(error)) return { status: 503, body: { error: `the store failed: ${(error as Error).message}` } };
      return { status: 500, body: { error: `internal error: ${(error as Error).message}` } };
    }
  }

  private async route(req: AdminRequest, path: string, query: URLSearchParams): Promise<[number, unknown]> {
    // Split before decoding, so a key holding an escaped "/" stays one segment.
    const parts = path.slice(ADMIN_API_PREFIX.length).split('/');
    if (parts.length === 1 && parts[0] === 'rules') {
      allow(req, 'GET');
      return [200, { rules: this.source.rules().map((r) => ruleView(r.settings)) }];
    }
    if (parts.length === 1 && parts[0] === 'limited') {
      allow(req, 'GET');
      return [200, this.limited(query)];
    }
    if (parts.length === 1 && parts[0] === 'plans') {
      allow(req, 'GET');
      return [200, plansView(this.source.overrides?.plans() ?? new Map())];
    }
    if (parts[0] === 'rules' && parts[2] === 'overrides' && (parts.length === 3 || parts.length === 4)) {
      const rule = this.rule(decode(parts[1]!, 'rule'));
      return routeOverrides(
        req,
        { name: rule.settings.name, overrides: rule.overrides },
        parts[3],
        this.source.overrides ?? { plans: () => new Map() },
      );
    }
    if (parts[0] === 'rules' && parts[2] === 'keys' && (parts.length === 4 || parts.length === 5)) {
      const rule = this.rule(decode(parts[1]!, 'rule'));
      const key = decode(parts[3]!, 'key');
      return keyAction(
        req,
        rule,
        key,
        parts[4],
        () => ruleLevelTargets(rule.settings),
        (r, k) => this.source.changed?.(r, k),
      );
    }
    if (parts[0] === 'rules' && parts[2] === 'policies' && parts[4] === 'keys' && (parts.length === 6 || parts.length === 7)) {
      const rule = this.rule(decode(parts[1]!, 'rule'));
      const policy = decode(parts[3]!, 'policy');
      const on = namedTarget(rule.settings, policy);
      const key = decode(parts[5]!, 'key');
      return keyAction(
        req,
        rule,
        key,
        parts[6],
        () => on,
        (r, k) => this.source.changed?.(r, k),
      );
    }
    throw new ApiError(404, {
      error:
        'no such admin endpoint; try GET /admin/rules, GET /admin/rules/RULE[/policies/POLICY]/keys/KEY, POST .../reset|block|unblock, GET /admin/limited, GET /admin/plans, GET|PUT|DELETE /admin/rules/RULE/overrides[/PATTERN].',
    });
  }

  private rule(name: string): AdminRule {
    const rule = this.source.rules().find((r) => r.settings.name === name);
    if (rule === undefined)
      throw new ApiError(404, { error: `no rule named ${JSON.stringify(name)}; GET /admin/rules lists them.`, field: 'rule' });
    return rule;
  }

  private limited(query: URLSearchParams): unknown {
    const minutes = wholeParam(query, 'minutes', 5, LIMITED_MINUTES);
    const top = wholeParam(query, 'top', LIMITED_TOP_DEFAULT, LIMITED_TOP_MAX);
    const only = query.get('rule');
    const rules = this.source.rules().filter((r) => only === null || r.settings.name === only);
    if (only !== null && rules.length === 0) throw new ApiError(404, { error: `no rule named ${JSON.stringify(only)}.`, field: 'rule' });
    return {
      minutes,
      // Entries held over every rule and minute: bounded (see LIMITED_TABLE_SIZE), whatever the flood.
      tracked: this.source.limited.size,
      rules: rules.map((r) => ({ rule: r.settings.name, keys: this.source.limited.top(r.settings.name, minutes, top) })),
    };
  }
}

function wholeParam(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const v = query.get(name);
  if (v === null) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw badField(name, `${name} must be a whole number from 1 to ${max}; got ${JSON.stringify(v)}.`);
  return Number(v);
}
