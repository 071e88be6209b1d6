/** The text `floodgate --help` prints: every command and option, each with an example. */

/** Full usage text. */
export const HELP = `floodgate — a rate-limiting reverse proxy (and decision service) on floodgate.

Usage:
  floodgate serve --upstream URL [options]     run the gateway in front of URL
  floodgate serve --config FILE [options]      run it with rules from a YAML file
  floodgate serve --grpc HOST:PORT --rls-config PATH [options]
                                               an Envoy rate limit service (RLS v3, gRPC) on
                                               envoyproxy/ratelimit's YAML (see docs/rls.md)
  floodgate check --config FILE [--rls-config PATH]
                                               validate a config file (and the rate limit YAML it
                                               names) and exit (0 valid, 2 not, 1 when a package
                                               serve needs is missing)
  floodgate --help                             this text
  floodgate --version                          floodgate's version (also -v)

Options of serve (flags win over the config file's values):
  --upstream URL          where admitted requests go; http or https, may carry a base path
                            e.g. --upstream http://127.0.0.1:3000
  --listen HOST:PORT      the proxy listener (default 127.0.0.1:8080; port 0 picks a free one)
                            e.g. --listen 0.0.0.0:8080
  --limit N/WINDOW        a policy of the default rule; repeat for several (all must admit)
                            e.g. --limit 3/5s --limit 1000/1d
  --key SOURCE            who a request counts against: ip (default), header:NAME,
                          header:NAME,ip (the header, else the client address),
                          cookie:NAME, query:NAME, path, path:N (segment N), method,
                          global (one counter for every client), or parts joined by +
                            e.g. --key header:x-api-key, --key "header:x-api-key + path:2"
  --algorithm NAME        fixed-window (default), sliding-window, sliding-log or token-bucket
                            e.g. --algorithm sliding-window
  --burst N               with --algorithm token-bucket: the bucket holds N (default: the limit)
                            e.g. --limit 10/1s --algorithm token-bucket --burst 50
  --block-duration D      after going over the limit, refuse the key for this long
                            e.g. --block-duration 1m
  --shadow                report what the default rule would do (Floodgate-Shadow header,
                          metrics, logs) without refusing anything
                            e.g. --limit 100/1m --shadow
  --redis URL             count in Redis (shared by every instance) instead of in memory
                            e.g. --redis redis://10.0.0.5:6379
  --redis-cluster NODES   count in a Redis Cluster: two or three of its nodes (HOST:PORT,…);
                          the others are discovered
                            e.g. --redis-cluster 10.0.0.5:6379,10.0.0.6:6379,10.0.0.7:6379
  --redis-sentinel SPEC   count in the master that Redis Sentinel names, followed through
                          failovers: MASTER@HOST:PORT,… (the sentinels)
                            e.g. --redis-sentinel mymaster@10.0.0.5:26379,10.0.0.6:26379
  --redis-user NAME       with a Redis flag: the ACL user
                            e.g. --redis-user floodgate
  --redis-password-file F with a Redis flag: the password, read from file F (never logged)
                            e.g. --redis-password-file /run/secrets/redis-password
  --redis-password-env V  with a Redis flag: the password, read from environment variable V
                            e.g. --redis-password-env REDIS_PASSWORD
  --redis-tls             with a Redis flag: TLS, servers' certificates signed by the system's CAs
                            e.g. --redis-cluster 10.0.0.5:6379,10.0.0.6:6379 --redis-tls
  --redis-ca FILE         with a Redis flag: TLS, servers' certificates signed by the CA in FILE
                          (PEM); --redis-cert and --redis-key add a client certificate
                            e.g. --redis-cluster … --redis-ca /etc/ssl/redis-ca.pem
  --local-first           with a Redis flag: spend quota locally and sync with Redis in batches
                            e.g. --redis redis://127.0.0.1:6379 --local-first
  --on-store-failure P    while Redis is away: insurance (default; per-instance memory
                          limits), fail-open, fail-closed, or reject (answer 503)
                            e.g. --on-store-failure fail-open
  --workers N             run N worker processes on this host; without --redis they share
                          counts through the cluster store in the primary, whose --admin
                          listener answers (metrics, admin API, dashboard) for all of them
                            e.g. --workers 4
  --lease DURATION        with --workers and no --redis: each worker spends quota the primary
                          leases it (about DURATION of its demand) without a call per request;
                          never more than the limit, but remaining is approximate (default 0: off)
                            e.g. --workers 4 --lease 100ms
  --config FILE           rules, store and proxy settings in YAML (see docs/gateway.md);
                          reloaded on SIGHUP and when the file changes
                            e.g. --config /etc/floodgate.yaml
  --no-watch              with --config: reload on SIGHUP only, not on file changes
                            e.g. --config floodgate.yaml --no-watch
  --grpc HOST:PORT        run the Envoy rate limit service (RLS v3) on this gRPC listener; no
                          --upstream needed (the HTTP listener then takes a free port unless
                          --listen says otherwise)
                            e.g. --grpc 127.0.0.1:8081 --rls-config /etc/ratelimit/
  --rls-config PATH       with --grpc: an envoyproxy/ratelimit YAML file, or a directory of them
                          (one domain each); reloaded on SIGHUP and when a file changes
                            e.g. --rls-config ./ratelimit.yaml
  --grpc-cert FILE        with --grpc: serve it over TLS with this PEM certificate (and --grpc-key);
                          without TLS, only Envoy must be able to reach the port
                            e.g. --grpc-cert rls.crt --grpc-key rls.key
  --grpc-key FILE         the private key of --grpc-cert (PEM)
                            e.g. --grpc-key /etc/floodgate/rls.key
  --grpc-client-ca FILE   with --grpc-cert: mutual TLS, answer only clients whose certificate this
                          CA signed
                            e.g. --grpc-client-ca envoy-ca.crt
  --admin HOST:PORT       serve /metrics, /healthz and /readyz on a separate listener only; the
                          proxy listener then forwards /_floodgate/metrics etc. like any path
                            e.g. --admin 127.0.0.1:9090
  --admin-token-file F    with --admin: turn on the admin API (/admin/..., JSON: inspect, reset,
                          block and unblock keys, most-limited keys) behind the bearer token in F;
                          with --workers the primary asks every worker and answers as one process
                            e.g. --admin 127.0.0.1:9090 --admin-token-file /run/secrets/fg-admin
  --otel                  also record metrics and store spans through OpenTelemetry's global
                          providers (needs @opentelemetry/api and an SDK the operator registers,
                          see docs/telemetry.md); /metrics stays as it is
                            e.g. NODE_OPTIONS="--import ./otel-setup.mjs" npx floodgate serve --otel ...
  --ready-upstream        /readyz also requires the upstream to accept a TCP connection
                          (probed at most once a second)
                            e.g. --ready-upstream
  --trust-proxy VALUE     believe X-Forwarded-For from these addresses (comma-separated
                          IPs/CIDRs, "loopback", "private"), or from any peer N hops deep
                          (a count trusts every client; warned of on a public listener)
                            e.g. --trust-proxy 10.0.0.0/8,loopback
  --headers MODE          RateLimit header family: ietf (default), draft-7, draft-6, legacy,
                          a comma-separated combination, or none
                            e.g. --headers draft-7,legacy
  --decision-path P       path of the decision endpoint (default /_floodgate/decide), or false
                          to turn it off
                            e.g. --decision-path /auth
  --drain-timeout D       on SIGTERM, wait this long for in-flight requests (default 30s)
                            e.g. --drain-timeout 10s
  --log-level LEVEL       fatal, error, warn, info (default), debug, trace or silent
                            e.g. --log-level debug
  -h, --help              this text
  -v, --version           print floodgate's version

Endpoints on the proxy listener:
  /_floodgate/decide      decision endpoint for nginx auth_request: 204 or 429 (?status=403)
                          (or the --decision-path)
  /_floodgate/metrics     Prometheus metrics;  /_floodgate/healthz, /_floodgate/readyz
                          (without --admin only)

Signals: SIGTERM/SIGINT drain and exit 0; SIGHUP reloads --config and --rls-config (a bad
file is logged and the last good config stays). Started by npx or an npm script, serve also
drains when that npm process exits (npm does not pass a SIGTERM on to it).

Example:
  floodgate serve --upstream http://127.0.0.1:3000 --limit 3/5s --key header:x-api-key
  curl -i -H 'X-API-Key: alice' http://127.0.0.1:8080/
`;
