/** The `overload` section compiled: which class and tenant each request is, and the limiter that admits it to the upstream. */
import type { IncomingMessage } from 'node:http';
import { createIpResolver, headerValue, ipKey, type TrustProxy } from '../../http/index.js';
import type { OverloadLimiter, OverloadRequest } from '../../index.js';
import { overloadLimiter } from '../config/overload-config.js';
import type { OverloadSettings } from '../config/settings.js';
import { compileMatch } from './compile-rules.js';
import { canonicalHost } from './path-match.js';

/**
 * The gate in front of the upstream: one OverloadLimiter per gateway process (the adaptive limit learns from the latency
 * this process's requests get), the classes' matches, and the tenant key.
 */
export class OverloadGate {
  /** Admits requests to the upstream; its stats() are the `floodgate_overload_*` metrics. */
  readonly limiter: OverloadLimiter;
  private readonly classes: ReadonlyArray<{ readonly name: string; readonly matches: ReturnType<typeof compileMatch> }>;
  private readonly rest: string;
  private readonly needsHost: boolean;
  private readonly tenantOf: (req: IncomingMessage) => string;
  private readonly errors: ReadonlySet<number>;

  /**
   * @param settings - the `overload` section
   * @param trustProxy - whose forwarding headers name the client (for `tenant: ip`)
   * @param caseSensitive - `paths.caseSensitive`, as the rules match
   */
  constructor(settings: OverloadSettings, trustProxy: TrustProxy, caseSensitive: boolean) {
    this.limiter = overloadLimiter(settings);
    this.classes = settings.priorities
      .filter((p) => p.match !== undefined)
      .map((p) => ({ name: p.name, matches: compileMatch(p.match!, caseSensitive) }));
    this.rest = settings.priorities.find((p) => p.match === undefined)!.name;
    this.needsHost = settings.priorities.some((p) => p.match?.hosts !== undefined);
    this.errors = new Set(settings.errorStatuses);
    const tenant = settings.tenant;
    if (tenant.kind === 'header') {
      const name = tenant.header;
      // Namespaced as the rules' keys are, so a header value equal to an address is not that address's line.
      this.tenantOf = (req) => {
        const value = headerValue(req.headers, name);
        return value === undefined ? '' : `key:${value}`;
      };
    } else if (tenant.kind === 'ip') {
      // The gateway has no framework of its own to ask: "framework" never reaches its settings.
      const resolve = createIpResolver({ trustProxy: trustProxy === 'framework' ? false : trustProxy });
      // By /64 for IPv6, as the `ip` key counts: one client cannot open a line per address of its subnet.
      this.tenantOf = (req) => {
        const ip = resolve(req.socket.remoteAddress, req.headers);
        return ip === undefined ? '' : ipKey(ip);
      };
    } else this.tenantOf = () => '';
  }

  /** The request's class (the first whose match fits, in the order written) and tenant. `req.url` is the canonical target. */
  request(req: IncomingMessage): OverloadRequest {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const host = this.needsHost ? canonicalHost(req.headers.host) : undefined;
    const method = req.method ?? 'GET';
    let priority = this.rest;
    for (const c of this.classes) {
      if (c.matches(method, path, host, req.headers)) {
        priority = c.name;
        break;
      }
    }
    return { priority, tenant: this.tenantOf(req) };
  }

  /** True when an upstream answer with this status says it is overloaded (`errorStatuses`). */
  overloaded(status: number): boolean {
    return this.errors.has(status);
  }
}
