/** The proxy listener's request path. */
/**
 * The request target checked, the gateway's own endpoints (decision, /_floodgate/), then the rules, then the upstream
 * or the rules' own answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { abortOnClose, viewOf, writeResponse } from '../../http/index.js';
import { INTERNAL_PREFIX, type GatewaySettings } from '../config/settings.js';
import { acceptTarget } from '../rules/path-match.js';
import type { RuleSet } from '../rules/rule-set.js';
import type { Verdict } from '../rules/verdict.js';
import { handleAdmin, type AdminSource } from '../admin/admin.js';
import { answer } from './answer.js';
import { handleDecision } from './decision-endpoint.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { UpstreamProxy } from './proxy.js';

const NO_UPSTREAM_BODY = JSON.stringify({
  type: 'about:blank',
  title: 'Not Found',
  status: 404,
  detail: 'This floodgate gateway runs without an upstream; it answers only its decision endpoint.',
});

/** What the request path reads of its gateway, at each request: a reload replaces the settings, rules and proxy; a drain begins. */
export interface RequestState {
  /** The settings in force. */
  settings(): GatewaySettings;
  /** The compiled rules in force. */
  rules(): RuleSet;
  /** The upstream; undefined for a gateway with no upstream (decision endpoint only). */
  proxy(): UpstreamProxy | undefined;
  /** True once the gateway drains. */
  draining(): boolean;
}

/** Answers the proxy listener's requests ({@link onRequest}), and counts those in flight. */
export class RequestPath {
  /** Requests counted against the rules and not answered yet. */
  inFlight = 0;

  /**
   * @param state - the gateway's state, read at each request
   * @param admin - what the /_floodgate/ endpoints report (the gateway)
   * @param log - where a broken answer is logged
   */
  constructor(
    private readonly state: RequestState,
    private readonly admin: AdminSource,
    private readonly log: GatewayLogger,
  ) {}

  /** The proxy listener's request handler. */
  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const state = this.state;
    const settings = state.settings();
    // Rules match, and the upstream gets, one canonical path: `/api/../x` or `//api/x` or `/%61pi/x`
    // must not slip past a rule for /api/ to an upstream that normalises paths itself.
    const url = acceptTarget(req, settings.paths);
    if (url === undefined) {
      writeResponse(res, 400, [], 'text/plain; charset=utf-8', 'bad request target\n');
      return;
    }
    // While draining every answer closes its connection, so keep-alive clients reconnect to another instance
    // instead of sending a request onto a connection that is about to close.
    if (state.draining()) res.shouldKeepAlive = false;
    const decisionPath = settings.decisionPath;
    // Any configured path (e.g. /auth), with or without a query string; one compare on the hot path.
    if (
      decisionPath !== false &&
      url.startsWith(decisionPath) &&
      (url.length === decisionPath.length || url.charCodeAt(decisionPath.length) === 63) /* ? */
    ) {
      handleDecision(req, res, url.length === decisionPath.length ? '' : url.slice(decisionPath.length + 1), state.rules(), settings.paths);
      return;
    }
    // With an admin listener, nothing internal answers on the public port: those paths are requests like any other.
    if (settings.admin === undefined && url.startsWith(INTERNAL_PREFIX) && this.internal(req, res, url)) return;
    const proxy = state.proxy();
    // Decision-only (no upstream): other paths are not counted against anyone's quota.
    if (proxy === undefined) {
      writeResponse(res, 404, [], 'application/problem+json', NO_UPSTREAM_BODY);
      return;
    }
    this.inFlight += 1;
    // 'close' comes once per response; on() spares the wrapper once() allocates per request.
    res.on('close', this.requestDone);
    proxy.hold();
    const rules = state.rules();
    // Only rules that wait need to hear that the client left; the others decide without it.
    const view = rules.waits ? { ...viewOf(req, req, url), signal: abortOnClose(res) } : viewOf(req, req, url);
    const decided = rules.decide(view, req.headers.host);
    // A refusal the rules remember comes back at once: answering it in this turn spares a closure and a promise per request.
    if (decided instanceof Promise)
      decided.then((verdict) => this.answer(req, res, proxy, verdict)).catch((error: unknown) => this.broken(res, error));
    else this.answer(req, res, proxy, decided);
  };

  /**
   * A decision that rejected or an answer that threw: neither should happen (the rules' promise never
   * rejects), but if one does, the client gets a 500 and the log the error, instead of the process an
   * unhandled rejection and the client a request that hangs.
   */
  private broken(res: ServerResponse, error: unknown): void {
    this.log.error({ err: error }, 'internal error while answering a request');
    if (!res.headersSent) writeResponse(res, 500, [], 'text/plain; charset=utf-8', 'internal error\n');
    else res.destroy();
  }

  private answer(req: IncomingMessage, res: ServerResponse, proxy: UpstreamProxy, verdict: Verdict): void {
    // A request that arrived before the drain began and is answered after it closes its connection too;
    // the proxy checks again when the upstream's head arrives (see the gateway's makeProxy).
    if (this.state.draining()) res.shouldKeepAlive = false;
    // forward() takes over the hold; any other outcome (a refusal, or a throw before forwarding) ends it here.
    let handed = false;
    try {
      handed = verdict.forward;
      answer(req, res, proxy, verdict);
    } finally {
      if (!handed) proxy.release();
    }
  }

  private readonly requestDone = (): void => {
    this.inFlight -= 1;
  };

  /** The admin endpoints under /_floodgate/ (when there is no admin listener); false when `url` is none of them (it is then proxied). */
  private internal(req: IncomingMessage, res: ServerResponse, url: string): boolean {
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    return handleAdmin(path.slice(INTERNAL_PREFIX.length - 1), req, res, this.admin);
  }
}
