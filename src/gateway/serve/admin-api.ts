/** The admin API on the admin listener: bearer-token checks, then JSON endpoints to list the rules, inspect, reset, block and unblock one key, and list the most-limited keys. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseDuration } from '../../duration.js';
import { isFloodgateError, isStoreFailure } from '../../errors.js';
import { boundKey } from '../../http/client-keys.js';
import type { RateLimiter } from '../../limiter.js';
import { MAX_KEY_BYTES } from '../rules/compile-rules.js';
import type { RuleSettings } from '../config/settings.js';
import type { LimitedKeys } from './limited-keys.js';
import type { RuleOverrides } from '../rules/rule-overrides.js';
import { LIMITED_MINUTES } from './limited-keys.js';
import { msOrForever, policyState, ruleView } from './admin-rules.js';
import { allow, ApiError, badField, decode, readJson, sendJson } from './admin-http.js';
import { plansView, routeOverrides, type OverrideAdmin } from './admin-overrides.js';

/** Where the admin API's paths start; room is left beside `rules` and `limited` for more resources. */
export const ADMIN_API_PREFIX = '/admin/';

/** One loaded rule: its settings and the limiters of its policies, in the same order. */
export interface AdminRule {
  /** The rule's settings. */
  readonly settings: RuleSettings;
  /** One RateLimiter per policy, in `settings.policies` order. */
  readonly limiters: readonly RateLimiter[];
  /** The rule's per-key overrides, when it has `overrides`. */
  readonly overrides?: RuleOverrides | undefined;
}

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

/**
 * The admin API. {@link handle} answers every path under `/admin/`: 404
 * when no token is configured, 401 without the right bearer token.
 */
export class AdminApi {
  /**
   * @param token - the bearer token; undefined leaves the API off
   * @param source - the running gateway
   */
  constructor(
    private readonly token: string | undefined,
    private readonly source: AdminApiSource,
  ) {}

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
    this.route(req, path, query).then(
      ([status, body]) => sendJson(res, status, body),
      (error: unknown) => {
        if (error instanceof ApiError) sendJson(res, error.status, error.body, error.headers);
        else if (isStoreFailure(error)) sendJson(res, 503, { error: `the store failed: ${(error as Error).message}` });
        else sendJson(res, 500, { error: `internal error: ${(error as Error).message}` });
      },
    );
    return true;
  }

  private async route(req: IncomingMessage, path: string, query: URLSearchParams): Promise<[number, unknown]> {
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
      const given = decode(parts[3]!, 'key');
      if (given === '') throw badField('key', 'the key is empty.');
      // As the rules count it: a long key is counted by its hash, so acting on it as given would touch nothing.
      const key = boundKey(given, MAX_KEY_BYTES);
      const action = parts[4];
      if (action === undefined) {
        allow(req, 'GET');
        return [200, await inspect(rule, key)];
      }
      allow(req, 'POST');
      switch (action) {
        case 'reset':
          await Promise.all(rule.limiters.map((l) => l.reset(key)));
          this.source.changed?.(rule.settings.name, key);
          return [200, await inspect(rule, key)];
        case 'unblock':
          await Promise.all(rule.limiters.map((l) => l.unblock(key)));
          this.source.changed?.(rule.settings.name, key);
          return [200, await inspect(rule, key)];
        case 'block': {
          const duration = blockDuration(await readJson(req));
          await Promise.all(rule.limiters.map((l) => l.block(key, duration === 'forever' ? 'forever' : `${duration}ms`)));
          return [200, { ...(await inspect(rule, key)), blockedForMs: msOrForever(duration === 'forever' ? Infinity : duration) }];
        }
        default:
          throw new ApiError(404, { error: `no action ${JSON.stringify(action)} on a key; use reset, block or unblock.` });
      }
    }
    throw new ApiError(404, {
      error:
        'no such admin endpoint; try GET /admin/rules, GET /admin/rules/RULE/keys/KEY, POST .../reset|block|unblock, GET /admin/limited, GET /admin/plans, GET|PUT|DELETE /admin/rules/RULE/overrides[/PATTERN].',
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
    const top = wholeParam(query, 'top', 20, 100);
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

async function inspect(rule: AdminRule, key: string): Promise<Record<string, unknown>> {
  const states = await Promise.all(rule.limiters.map((l) => l.inspect(key)));
  const override = rule.overrides?.tables.map((t) => t.match(key)?.pattern).find((p) => p !== undefined);
  return {
    rule: rule.settings.name,
    key,
    ...(override === undefined ? {} : { override }),
    policies: states.map((seen, i) => policyState(rule.settings.policies[i]!, seen)),
  };
}

function wholeParam(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const v = query.get(name);
  if (v === null) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw badField(name, `${name} must be a whole number from 1 to ${max}; got ${JSON.stringify(v)}.`);
  return Number(v);
}

/** `{"duration": "10m" | 60000 | "forever"}` → ms or "forever". */
function blockDuration(body: unknown): number | 'forever' {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badField('body', 'the body must be a JSON object such as {"duration":"10m"} or {"duration":"forever"}.');
  const known = new Set(['duration']);
  const extra = Object.keys(body).find((k) => !known.has(k));
  if (extra !== undefined) throw badField(extra, `unknown field ${JSON.stringify(extra)}; the body takes only duration.`);
  const d = (body as { duration?: unknown }).duration;
  if (d === undefined) throw badField('duration', 'duration is missing: {"duration":"10m"} or {"duration":"forever"}.');
  if (d === 'forever') return 'forever';
  try {
    const ms = parseDuration(d as string, 'duration');
    if (ms <= 0) throw badField('duration', 'duration must be more than 0; to end a block, POST .../unblock.');
    return ms;
  } catch (error) {
    if (error instanceof ApiError) throw error;
    if (isFloodgateError(error)) throw badField('duration', `${error.message} (or "forever")`);
    throw error;
  }
}
