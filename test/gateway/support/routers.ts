// Real upstream apps (Express 5, Fastify 5, Koa with @koa/router, node:http) with one limited route, GET /api/*, whose handler records every request it serves as that framework routed it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import Router from '@koa/router';

/** A running upstream app. */
export interface RouterApp {
  /** Framework name for the table. */
  readonly name: string;
  /** Base URL. */
  readonly url: string;
  /** Requests the limited route's handler served (method and URL as the app saw them). */
  readonly hits: Array<{ method: string; url: string }>;
  close(): Promise<void>;
}

function listening(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

function closing(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Express 5: routes case-insensitively and runs GET handlers for HEAD. */
export async function expressApp(): Promise<RouterApp> {
  const hits: RouterApp['hits'] = [];
  const app = express();
  app.get('/api/*rest', (req, res) => {
    hits.push({ method: req.method, url: req.originalUrl });
    res.send('secret');
  });
  const server = createServer(app);
  return { name: 'express5', url: await listening(server), hits, close: () => closing(server) };
}

/** Fastify 5: case-sensitive, HEAD routes exposed for GET routes. */
export async function fastifyApp(): Promise<RouterApp> {
  const hits: RouterApp['hits'] = [];
  const app = Fastify();
  app.get('/api/*', async (req) => {
    hits.push({ method: req.method, url: req.url });
    return 'secret';
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { name: 'fastify5', url, hits, close: () => app.close() };
}

/** Koa 2 with @koa/router: case-insensitive, GET routes answer HEAD. */
export async function koaApp(): Promise<RouterApp> {
  const hits: RouterApp['hits'] = [];
  const app = new Koa();
  const router = new Router();
  router.get('/api/*rest', (ctx) => {
    hits.push({ method: ctx.method, url: ctx.originalUrl });
    ctx.body = 'secret';
  });
  app.use(router.routes()).use(router.allowedMethods());
  const server = createServer(app.callback());
  return { name: 'koa2', url: await listening(server), hits, close: () => closing(server) };
}

/**
 * A deliberately loose node:http app: it decodes the whole path, folds case,
 * reads `\` as `/`, drops `;` parameters and resolves dot segments before
 * routing — what a hand-written router could plausibly do.
 */
export async function nodeApp(): Promise<RouterApp> {
  const hits: RouterApp['hits'] = [];
  const server = createServer((req, res) => {
    let path = (req.url ?? '/')
      .replace(/^https?:\/\/[^/]*/i, '')
      .split('?')[0]!
      .split('#')[0]!;
    try {
      path = decodeURIComponent(decodeURIComponent(path));
    } catch {
      // left as it is
    }
    path = path
      .replace(/\\/g, '/')
      .replace(/;[^/]*/g, '')
      .toLowerCase();
    const resolved = new URL(path.replace(/^\/*/, '/'), 'http://x').pathname;
    if ((req.method === 'GET' || req.method === 'HEAD') && resolved.startsWith('/api/')) {
      hits.push({ method: req.method, url: req.url ?? '' });
      res.end('secret');
      return;
    }
    res.statusCode = 404;
    res.end('not found');
  });
  return { name: 'node:http', url: await listening(server), hits, close: () => closing(server) };
}

/** Every app above. */
export const ROUTER_APPS = [expressApp, fastifyApp, koaApp, nodeApp] as const;
