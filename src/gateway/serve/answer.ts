/** Sending a request's verdict: the rules' own prepared answer, or the upstream's through the proxy. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeResponse } from '../../http/index.js';
import type { Verdict } from '../rules/verdict.js';
import type { UpstreamProxy } from './proxy.js';

/** Sends the rules' verdict: their own answer, or the upstream's. */
export function answer(req: IncomingMessage, res: ServerResponse, proxy: UpstreamProxy, verdict: Verdict): void {
  if (!verdict.forward) {
    if (verdict.wire === undefined) {
      writeResponse(res, verdict.status, verdict.headers, verdict.contentType, verdict.body);
    } else if (!res.headersSent && !res.writableEnded) {
      // While draining, shouldKeepAlive is false already and node adds Connection: close itself.
      res.writeHead(verdict.status, verdict.wire as string[]);
      res.end(verdict.body);
    }
  } else {
    proxy.forward(req, res, verdict.headers, verdict.charges, verdict.holds);
  }
}
