/** The decision endpoint for nginx `auth_request` and other proxies. */
/**
 * Decides about the request described by X-Original-* headers and answers 204, or 429 (or the status asked for) with
 * the RateLimit fields.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { headerValue, setHeaders, writeResponse, abortOnClose } from '../../http/index.js';
import { requestTarget } from '../rules/path-match.js';
import type { PathSettings } from '../config/settings.js';
import type { RuleSet } from '../rules/rule-set.js';
import { whenDecided } from '../rules/verdict.js';
import { abandonAll } from '../rules/rule-slots.js';
import type { GatewayView } from '../rules/key-readers.js';

/**
 * Answers one decision request. The original request is read from
 * `X-Original-Method` (default GET), `X-Original-URI` (default `/`) and
 * `X-Original-Host` (default this request's Host; an absolute-form URI's
 * authority wins, as it does for the upstream); every other header,
 * the API key included, is this request's own (nginx passes the client's
 * headers to the auth subrequest). The client address comes from the
 * socket or, with trustProxy, from X-Forwarded-For as for proxied requests.
 *
 * `?status=403` (or 401) makes refusals use that status: nginx's
 * auth_request only passes 401 and 403 on; any other status is an error.
 */
export function handleDecision(req: IncomingMessage, res: ServerResponse, query: string, rules: RuleSet, paths: PathSettings): void {
  const asked = /(?:^|&)status=([^&]*)/.exec(query)?.[1];
  if (asked !== undefined && asked !== '401' && asked !== '403') {
    writeResponse(
      res,
      400,
      [],
      'text/plain; charset=utf-8',
      `status must be 401 or 403 (the statuses nginx's auth_request passes on); got ${JSON.stringify(asked)}.\n`,
    );
    return;
  }
  const refusedStatus = asked;
  // The same canonical path proxied requests are matched on (see rules/path-match.ts): nginx passes $request_uri as the client sent it.
  const target = requestTarget(headerValue(req.headers, 'x-original-uri') ?? '/', paths);
  if (target === undefined) {
    writeResponse(res, 400, [], 'text/plain; charset=utf-8', 'X-Original-URI is not a request target.\n');
    return;
  }
  const uri = target.target;
  const q = uri.indexOf('?');
  const view: GatewayView = {
    raw: req,
    socketAddress: req.socket.remoteAddress,
    headers: req.headers,
    method: (headerValue(req.headers, 'x-original-method') ?? 'GET').toUpperCase(),
    path: q < 0 ? uri : uri.slice(0, q),
    // The original request's query, for query:NAME keys (req.url is the endpoint's own).
    query: q < 0 ? '' : uri.slice(q + 1),
  };
  const host = target.authority ?? headerValue(req.headers, 'x-original-host') ?? req.headers.host;
  whenDecided(rules.decide(rules.waits ? { ...view, signal: abortOnClose(res) } : view, host), (verdict) => {
    if (verdict.forward) {
      // No response of the original request passes here, so nothing could free a slot at its end: rules with a
      // concurrency limit are not enforced in flight by this endpoint (a gateway without an upstream refuses them).
      abandonAll(req, verdict.holds);
      abandonAll(req, verdict.charges);
      setHeaders(res, verdict.headers);
      res.statusCode = 204;
      res.end();
      return;
    }
    const status = refusedStatus !== undefined && verdict.status === 429 ? Number(refusedStatus) : verdict.status;
    writeResponse(res, status, verdict.headers, verdict.contentType, verdict.body);
  });
}
