/** The reverse proxy: an undici keep-alive pool to the upstream. */
/**
 * Small request bodies buffered and large ones streamed, 502/504 on upstream failure, allowed upgrades tunnelled.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { Pool } from 'undici';
import type { HeaderPair, TrustProxy } from '../../http/index.js';
import type { Undici } from '../runtime/optional-deps.js';
import { ForwardHeaders } from './forward-headers.js';
import { responseHead } from './response-head.js';
import { hasBody, readBody, watchBodyRate, type BodyBuffering, type OutgoingBody } from './request-body.js';
import { UpstreamQueue } from './upstream-queue.js';
import { requestBufferBudget } from './request-buffer-budget.js';
import { ResponseRateWatch } from './response-rate.js';
import { observeCost, withoutUsageHeaders } from './response-cost.js';
import { ResponseRelay } from './response-relay.js';
import { answerProblem } from './problem-answer.js';
import { upgradeThrough, type TunnelDeps } from './proxy-upgrade.js';
import { askingUsage } from './request-usage.js';
import { UpstreamAbort } from './upstream-abort.js';
import { DEFAULT_DRAIN_BYTES } from '../config/cost-config.js';
import type { Hold } from '../rules/rule-slots.js';
import type { OverloadGate } from '../rules/overload-gate.js';
import type { OverloadSlot } from '../../index.js';
import { endFailed, openTicket, passGate, refuseOverloaded, type Ticket } from './overload-pass.js';
import type { Charge } from '../rules/rule-cost.js';
import type { GatewayLogger } from '../runtime/log.js';
import type { GatewayMetrics, LatencyChild } from '../runtime/metrics.js';
import type { ProxySettings } from '../config/settings.js';

/** Upstream error codes that mean "the upstream took too long" (504) rather than "the upstream is broken" (502). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

/** Forwards requests to one upstream origin. */
export class UpstreamProxy {
  /** The upstream origin, e.g. `http://127.0.0.1:3000`. */
  readonly origin: string;
  private readonly pool: Pool;
  /** Path the upstream URL carries (e.g. `/v1`), prepended to every request path; empty for `/`. */
  private readonly basePath: string;
  private readonly forwardHeaders: ForwardHeaders;
  private lastWarning = 0;
  private readonly responseLatency: LatencyChild;
  private readonly upstream: URL;
  private readonly connectTimeoutMs: number;
  private readonly headersTimeoutMs: number;
  private readonly buffering: BodyBuffering;
  private readonly responseRate: ResponseRateWatch;
  private readonly minBodyRate: number;
  private readonly clientWriteTimeoutMs: number;
  /** Longest an answer is drained after its client left: the upstream's headers and body timeouts, end to end. */
  private readonly drainMs: number;
  private readonly queue: UpstreamQueue;
  /** What an upgrade's tunnel needs of this proxy (see proxy-upgrade.ts). */
  private readonly tunnels: TunnelDeps;
  /** Requests decided (or being decided) on this proxy and not yet handed to the pool; see {@link hold}. */
  private holds = 0;
  private idle: (() => void) | undefined;

  /**
   * @param undici - the undici module
   * @param upstream - the upstream URL
   * @param settings - timeouts and pool size
   * @param trustProxy - whose X-Forwarded-* and identity headers to keep (everyone else's are replaced or stripped)
   * @param metrics - the gateway's metrics
   * @param log - the gateway's logger
   * @param draining - true once the gateway drains: a response whose head is written then closes its connection
   * @param gate - the `overload` section's gate: a request waits there for a slot before it takes an upstream connection
   */
  constructor(
    undici: Undici,
    upstream: URL,
    settings: ProxySettings,
    trustProxy: TrustProxy,
    private readonly metrics: GatewayMetrics,
    private readonly log: GatewayLogger,
    private readonly draining: () => boolean = () => false,
    readonly gate?: OverloadGate,
  ) {
    this.origin = upstream.origin;
    this.basePath = upstream.pathname === '/' ? '' : upstream.pathname.replace(/\/$/, '');
    this.pool = new undici.Pool(this.origin, {
      connections: settings.connections,
      connect: { timeout: settings.connectTimeoutMs },
      headersTimeout: settings.headersTimeoutMs,
      bodyTimeout: settings.bodyTimeoutMs,
      keepAliveTimeout: settings.idleTimeoutMs,
      keepAliveMaxTimeout: Math.max(settings.idleTimeoutMs, 600_000),
    });
    this.forwardHeaders = new ForwardHeaders(trustProxy, settings.stripHeaders);
    this.upstream = upstream;
    this.connectTimeoutMs = settings.connectTimeoutMs;
    this.headersTimeoutMs = settings.headersTimeoutMs;
    this.buffering = { limit: settings.requestBuffer, budget: requestBufferBudget(metrics, settings.requestBufferTotal) };
    this.responseRate = new ResponseRateWatch(settings.minResponseRate, settings.responseTimeoutMs, metrics, log);
    this.minBodyRate = settings.minBodyRate;
    this.clientWriteTimeoutMs = settings.clientWriteTimeoutMs;
    this.drainMs = settings.headersTimeoutMs + settings.bodyTimeoutMs;
    this.queue = new UpstreamQueue(settings.connections, settings.queueTimeoutMs);
    this.responseLatency = metrics.upstreamLatencyChild('response');
    this.tunnels = {
      gate: this.gate,
      upstream,
      basePath: this.basePath,
      forwardHeaders: this.forwardHeaders,
      timeoutMs: this.connectTimeoutMs + this.headersTimeoutMs,
      warn: (error, message) => this.warn(error, message),
      release: () => this.release(),
    };
  }

  /**
   * Keeps this proxy's pool open for a request until it is forwarded (or
   * answered without the upstream): a reload that replaces the proxy while a
   * decision is pending must not close the pool under it. Every hold ends
   * with exactly one {@link release}, {@link forward} or {@link upgrade}.
   */
  hold(): void {
    this.holds += 1;
  }

  /** Ends a {@link hold} for a request that will not be forwarded. */
  release(): void {
    this.holds -= 1;
    if (this.holds === 0 && this.idle !== undefined) this.idle();
  }

  /**
   * Forwards `req` and streams the answer into `res`, adding `extra`
   * (the RateLimit fields) to the upstream's headers. A body up to
   * `proxy.requestBuffer` is read whole first, so no upstream connection
   * waits on a slow client; a larger one streams and must keep
   * `proxy.minBodyRate`. Answers 502 or 504 itself when the upstream fails
   * before its headers; after them, a failure can only cut the response
   * (the status is already sent). `charges` (rules with `cost`) are
   * committed when the upstream exchange ends, at the cost it reported;
   * `holds` (slots of rules with `concurrency`) are freed when it ends,
   * whether the upstream answered or failed (502, 504). With either, a
   * client that leaves does not cut the upstream request: its answer is
   * drained (see ResponseRelay) so the slot lasts as long as the upstream's
   * work and the usage is still read. Ends the caller's {@link hold}.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly HeaderPair[],
    charges?: readonly Charge[],
    holds?: readonly Hold[],
  ): void {
    const watch = charges === undefined ? undefined : observeCost(req, res, charges, req.method === 'HEAD', this.drainMs + 1000);
    if (holds !== undefined) for (const held of holds) held.watch(req, res, this.drainMs + 1000);
    const relay =
      watch === undefined && holds === undefined
        ? undefined
        : new ResponseRelay(res, watch, { bytes: watch?.drainBytes ?? DEFAULT_DRAIN_BYTES, ms: this.drainMs });
    // A client that left while its request was decided (a store round trip, a wait) is not served: its slots are
    // freed now (ending the closed response), so forwarding would run it upstream past every in-flight limit.
    if (res.destroyed) {
      relay?.ended();
      this.release();
      return;
    }
    // Most requests have no body: nothing to read from the client, no closures to allocate.
    if (!hasBody(req)) {
      this.enqueue(req, res, extra, null, false, relay);
      return;
    }
    readBody(
      req,
      res,
      this.buffering,
      (body, streaming) => {
        if (!res.destroyed) this.enqueue(req, res, extra, askingUsage(req, body, relay?.watch?.requestUsage === true), streaming, relay);
        else {
          relay?.ended();
          this.release();
        }
      },
      () => {
        relay?.ended();
        this.release();
      },
    );
  }

  /**
   * Passes the `overload` gate, when there is one: a slot at once, a wait in the request's class and tenant line (given up
   * when the client leaves), or a 503. The body is read by then, so a client that trickles its body waits before the gate
   * and its upload is not counted as the upstream's latency. Then on to the connection queue. Ends the caller's hold when
   * the request is not forwarded.
   */
  private enqueue(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly HeaderPair[],
    body: OutgoingBody,
    streaming: boolean,
    relay: ResponseRelay | undefined,
  ): void {
    const gate = this.gate;
    if (gate === undefined) {
      this.enterPool(req, res, extra, body, streaming, relay, undefined);
      return;
    }
    passGate(
      gate,
      req,
      res,
      (slot) => this.passed(req, res, extra, body, streaming, relay, slot),
      () => {
        relay?.ended();
        this.release();
      },
    );
  }

  /** The gate's decision: on to the connection queue with the slot, or the refusal. */
  private passed(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly HeaderPair[],
    body: OutgoingBody,
    streaming: boolean,
    relay: ResponseRelay | undefined,
    slot: OverloadSlot,
  ): void {
    if (!slot.allowed) {
      refuseOverloaded(res, extra, slot);
      relay?.ended();
      this.release();
      return;
    }
    this.enterPool(req, res, extra, body, streaming, relay, openTicket(slot, req, streaming));
  }

  /**
   * Waits for a free upstream connection (see UpstreamQueue), then
   * dispatches; 503 when none frees up in time. The hold ends only once the
   * request is in the pool (or answered, or its client gone), so a retired
   * pool is not closed under a request still waiting in this queue.
   */
  private enterPool(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly HeaderPair[],
    body: OutgoingBody,
    streaming: boolean,
    relay: ResponseRelay | undefined,
    ticket: Ticket | undefined,
  ): void {
    if (res.destroyed) {
      // The client left while it waited at the gate: its slot goes back unused.
      ticket?.slot.cancel();
      relay?.ended();
      this.release();
      return;
    }
    if (this.queue.tryEnter()) {
      try {
        this.dispatch(req, res, extra, body, streaming, relay, ticket);
      } finally {
        this.release();
      }
      return;
    }
    const giveUp = this.queue.wait(
      () => {
        res.off('close', left);
        try {
          this.dispatch(req, res, extra, body, streaming, relay, ticket);
        } finally {
          this.release();
        }
      },
      () => {
        res.off('close', left);
        // No connection freed in time: the gateway itself is saturated, an overload signal like the upstream's own.
        ticket?.slot.drop();
        this.release();
        this.overloaded(res, extra);
        relay?.ended();
      },
    );
    const left = (): void => {
      if (!giveUp()) return;
      ticket?.slot.cancel();
      relay?.ended();
      this.release();
    };
    res.once('close', left);
  }

  private dispatch(
    req: IncomingMessage,
    res: ServerResponse,
    extra: readonly HeaderPair[],
    body: OutgoingBody,
    streaming: boolean,
    relay: ResponseRelay | undefined,
    ticket: Ticket | undefined,
  ): void {
    const started = performance.now();
    const cut = new UpstreamAbort();
    const abort = cut.abort;
    // A client that goes away must not keep an upstream request (and a pool slot) busy, unless a slot or a cost
    // waits on its end: then the answer is drained, bounded (the upstream's work goes on whether the client is there).
    res.once('close', () => {
      if (res.writableFinished) return;
      if (relay === undefined) abort();
      else relay.left(abort);
    });
    const stopWatch = streaming
      ? watchBodyRate(req, this.minBodyRate, () => {
          this.metrics.upstreamError('body');
          this.warn(
            { code: 'SLOW_BODY', message: `request body slower than ${this.minBodyRate} bytes/s` },
            'client body too slow; request cut',
          );
          if (!res.headersSent) {
            res.shouldKeepAlive = false;
            res.writeHead(408, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
            res.end('request body too slow\n');
          }
          abort();
          req.destroy();
        })
      : undefined;
    let headersReceived = false;
    this.pool
      .stream(
        {
          path: this.basePath + (req.url ?? '/'),
          method: req.method as 'GET',
          headers:
            relay?.watch === undefined ? this.forwardHeaders.build(req) : withoutUsageHeaders(this.forwardHeaders.build(req), relay.watch),
          body,
          signal: cut,
        },
        ({ statusCode, headers }) => {
          headersReceived = true;
          const now = performance.now();
          this.responseLatency.observe((now - started) / 1000);
          // The sample is taken at the head: a client that reads the body slowly must not read as a slow upstream.
          if (ticket !== undefined)
            ticket.outcome = { latencyMs: Math.max(0, now - ticket.since), error: this.gate!.overloaded(statusCode) };
          // One writeHead with a flat list: each setHeader would validate and store a field only to
          // have writeHead walk them again, which cost more than the limiter's whole decision.
          if (this.draining()) res.shouldKeepAlive = false;
          // undici stops its body timer while the client holds it back, so a client that never reads would
          // keep the upstream connection for ever; a socket idle this long while the answer is sent is cut.
          // Destroying the response aborts the upstream request (its 'close' handler above).
          if (this.clientWriteTimeoutMs > 0) res.setTimeout(this.clientWriteTimeoutMs, () => res.destroy());
          // An idle timer misses a client that reads a little now and then: it must also keep a rate, and finish in time.
          if (this.responseRate.on) this.responseRate.relaying(res);
          res.writeHead(statusCode, responseHead(headers, extra));
          return relay === undefined ? res : relay.body(statusCode, headers);
        },
      )
      .then(
        // Bodiless requests, the common case, share one bound callback rather than a closure each.
        stopWatch === undefined && relay === undefined && ticket === undefined
          ? this.leaveQueue
          : () => {
              stopWatch?.();
              this.queue.leave();
              if (ticket !== undefined) ticket.slot.release(ticket.outcome);
              relay?.ended();
            },
        (error: unknown) => {
          stopWatch?.();
          this.queue.leave();
          if (ticket !== undefined) endFailed(ticket, error, res);
          this.failed(error, res, extra, started, headersReceived);
          relay?.ended();
        },
      );
  }

  /**
   * Opens a tunnel for an upgrade request `checkUpgrade` accepted, on an
   * upstream connection of its own: the upstream must answer 101, after
   * which bytes are copied both ways until either side closes. Ends the
   * caller's {@link hold}.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, protocol: string, extra: readonly HeaderPair[]): void {
    upgradeThrough(this.tunnels, req, socket, head, protocol, extra);
  }

  /**
   * Closes the pool once no request decided on this proxy is still waiting
   * to be forwarded, then once the requests in flight are done. Used when a
   * reload replaces the proxy.
   */
  retire(): Promise<void> {
    if (this.holds === 0) return this.pool.close();
    return new Promise<void>((resolve) => (this.idle = resolve)).then(() => this.pool.close());
  }

  /** Stops taking requests and resolves once those in flight are done. */
  close(): Promise<void> {
    return this.pool.close();
  }

  /** Aborts everything in flight. */
  destroy(): Promise<void> {
    return this.pool.destroy();
  }

  private failed(error: unknown, res: ServerResponse, extra: readonly HeaderPair[], started: number, headersReceived: boolean): void {
    const code = (error as { code?: string; name?: string }).code ?? (error as { name?: string }).name ?? '';
    // The client left; there is nobody to answer.
    if (code === 'UND_ERR_ABORTED' || code === 'AbortError' || res.destroyed) return;
    if (headersReceived || res.headersSent) {
      this.metrics.upstreamError('body');
      this.warn(error, 'upstream failed mid-response; closing the client connection');
      res.destroy();
      return;
    }
    const timeout = TIMEOUT_CODES.has(code);
    this.metrics.upstream(timeout ? 'timeout' : 'error', (performance.now() - started) / 1000);
    this.metrics.upstreamError(timeout ? 'timeout' : 'connect');
    this.warn(error, timeout ? 'upstream timed out' : 'upstream failed');
    answerProblem(
      res,
      timeout ? 504 : 502,
      timeout ? 'Gateway Timeout' : 'Bad Gateway',
      timeout ? 'The upstream did not answer in time.' : 'The upstream could not be reached.',
      extra,
    );
  }

  private readonly leaveQueue = (): void => this.queue.leave();

  /** No upstream connection freed up within proxy.queueTimeout: the upstream is saturated, so the client is told to come back. */
  private overloaded(res: ServerResponse, extra: readonly HeaderPair[]): void {
    this.metrics.upstreamError('queue');
    this.warn(
      { code: 'QUEUE_TIMEOUT', message: 'every upstream connection stayed busy' },
      'no upstream connection free in time; answered 503',
    );
    answerProblem(res, 503, 'Service Unavailable', 'Every upstream connection is busy; try again shortly.', extra, [['Retry-After', '1']]);
  }

  /** Logs upstream trouble at most once per second, so an outage does not log at the request rate. */
  private warn(error: unknown, message: string): void {
    const now = Date.now();
    if (now - this.lastWarning < 1000) return;
    this.lastWarning = now;
    const e = error as { code?: string; message?: string };
    this.log.warn({ upstream: this.origin, code: e.code, error: e.message }, message);
  }
}
