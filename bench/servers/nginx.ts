/** The forwarding scenario's non-Node anchor: nginx, one worker, proxy_pass with upstream keep-alive, optionally limit_req. */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchEnv, runServer } from '../lib/serve.js';
import { startUpstream } from '../lib/upstream.js';

/** The nginx.conf of the run: `limitReq` adds a limit_req zone keyed by X-API-KEY at a rate no key reaches. */
function config(dir: string, port: number, upstream: URL, limitReq: boolean): string {
  return `
worker_processes 1;
error_log ${dir}/error.log warn;
pid ${dir}/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  # Like Node's keep-alive, which has no per-connection request cap: wrk's connections are not recycled every 1000 requests.
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream app {
    server ${upstream.host};
    keepalive 64;
    keepalive_requests 1000000;
  }
  ${limitReq ? 'limit_req_zone $http_x_api_key zone=k:10m rate=100000000r/s;' : ''}
  server {
    listen 127.0.0.1:${port};
    location / {
      ${limitReq ? 'limit_req zone=k burst=1000 nodelay;' : ''}
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

runServer(async () => {
  const env = benchEnv();
  const upstream = new URL(await startUpstream());
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-nginx-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  // Started as root, nginx's worker runs as nobody and must reach the temp paths a large request body is buffered to.
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, 'nginx.conf'), config(dir, env.port, upstream, process.env.NGINX_LIMIT_REQ === '1'));
  // Not daemonized: nginx's master and worker stay in this process's tree, so the harness counts their CPU as the server's.
  const nginx = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.on('exit', () => nginx.kill('SIGKILL'));
  nginx.once('error', (error) => {
    console.error(`cannot start nginx: ${error.message}`);
    process.exit(1);
  });
  nginx.once('exit', (code) => {
    console.error(`nginx exited (${code})`);
    process.exit(1);
  });
  for (let i = 0; ; i += 1) {
    const ok = await fetch(`http://127.0.0.1:${env.port}/`).then(
      async (r) => (await r.arrayBuffer(), r.status === 200),
      () => false,
    );
    if (ok) break;
    if (i === 200) throw new Error('nginx did not answer 200 within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  process.stdout.write('ready\n');
  const stop = (): void => {
    nginx.removeAllListeners('exit');
    nginx.once('exit', () => process.exit(0));
    nginx.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
});
