/** The scenario contract of the benchmark harness: what a file in bench/scenarios/ exports. */
import type { GrpcLoad } from './lib/ghz.js';
import type { CpuPlan } from './lib/processes.js';
import type { Row } from './lib/report.js';

export type { GrpcLoad };

/** What the harness hands a scenario that runs itself ({@link Scenario.run}). */
export interface OwnRunContext {
  /** Repository root: the working directory of every process it starts. */
  readonly root: string;
  /** The run's private copy of dist/ (pass it to `startServer`). */
  readonly dist: string;
  /** Where the server under test and the load generator run; the harness itself is already pinned to `plan.load`. */
  readonly plan: CpuPlan;
  /** `--duration` / `--warmup` when given on the command line, else undefined (the scenario's own defaults apply). */
  readonly durationS: number | undefined;
  readonly warmupS: number | undefined;
  /** `--phases a,c`: the parts of the scenario to run; undefined: all. */
  readonly phases: readonly string[] | undefined;
  /** `--rounds N` (default 1): how many times to measure each part, for a scenario that reports every round. */
  readonly rounds: number;
}

/** What a scenario that runs itself returns: its JSON rows and the text printed in place of the harness's table. */
export interface OwnRunResult {
  readonly rows: readonly Row[];
  readonly text: string;
}

/**
 * One way of serving the scenario's endpoint: a server process the harness
 * starts, loads with wrk, measures and stops.
 *
 * The process is started as `node --import tsx <server> ...args` with the
 * repository root as working directory, pinned to the "server" CPU, and with
 * these variables added to the environment (next to {@link Variant.env}):
 *
 * - `FLOODGATE_BENCH_PORT`: the port to listen on, on 127.0.0.1;
 * - `FLOODGATE_BENCH_VARIANT`: the variant's name;
 * - `FLOODGATE_BENCH_REDIS_URL`: `redis://host:port` of the run's Redis, when
 *   the scenario run started one (some variant has `redis: true`);
 * - `FLOODGATE_BENCH_POSTGRES_URL`: `postgres://…` of the run's PostgreSQL,
 *   when some variant has `postgres: true`;
 * - `FLOODGATE_BENCH_DIST`: the run's private copy of dist/; import the
 *   package from there with `importDist` (bench/lib/serve.ts), so a build
 *   started elsewhere during the run cannot change or delete it;
 * - `FLOODGATE_BENCH_UPSTREAM_URL`: `http://127.0.0.1:port` of the run's
 *   upstream (an app answering 200 `{}`), when the scenario has
 *   {@link Scenario.upstream}: proxies forward there instead of starting an
 *   upstream of their own, so its CPU is not counted as the server's.
 *
 * It must print a line `ready` on stdout once it listens, and exit on SIGTERM.
 * `bench/lib/serve.ts` does both for a node:http server.
 */
export interface Variant {
  /** Short name shown in the table and the JSON, e.g. `"floodgate-redis"`. Unique in the scenario. */
  readonly name: string;
  /** One line for `npm run bench` without arguments and for the report. */
  readonly description?: string;
  /** Absolute path of the server entry (`.ts` or `.js`); use `fileURLToPath(new URL(..., import.meta.url))`. */
  readonly server: string;
  /** Extra command-line arguments of the server process. */
  readonly args?: readonly string[];
  /** Extra environment of the server process. */
  readonly env?: Readonly<Record<string, string>>;
  /** True when the variant talks to Redis; the harness then starts one redis-server for the whole run. */
  readonly redis?: boolean;
  /** True when the variant counts on a Redis Cluster; the harness then starts one 3-master cluster for the whole run. */
  readonly redisCluster?: boolean;
  /** True when the variant talks to PostgreSQL; the harness then starts one for the whole run (FLOODGATE_BENCH_POSTGRES_URL). */
  readonly postgres?: boolean;
}

/**
 * A benchmark scenario: an endpoint served several ways.
 * The first variant is the baseline (normally the bare server without a
 * limiter); every row's ratio is its requests/s divided by the baseline's.
 */
export interface Scenario {
  /** Name used on the command line; must equal the file name without `.ts`. */
  readonly name: string;
  /** One line shown in the scenario list and above the table. */
  readonly description: string;
  /** The baseline first, then the variants to compare with it. */
  readonly variants: readonly Variant[];
  /** Path wrk requests. Default `"/"`. */
  readonly path?: string;
  /**
   * Optional Lua for wrk that may define `init(args)` and `request()` (e.g. to
   * send a random API key per request). The harness owns `setup`,
   * `response` and `done`, which count statuses and report latency; do not
   * define those.
   */
  readonly wrkLua?: string;
  /** wrk connections when `--connections` is not given. Default 100. */
  readonly connections?: number;
  /**
   * When set, each variant is also loaded open-loop at this many requests/s
   * (after the saturation run, for the same duration) and the table gains
   * p50/p99 at that rate, counted from each request's scheduled start
   * (bench/lib/rate.ts). The cluster-store scenario reports its latencies this way.
   */
  readonly fixedRate?: number;
  /**
   * The path of the fixed-rate run's `i`-th request, for a scenario whose wrk
   * script varies its requests (wrk's Lua cannot drive the open-loop runner);
   * default `path` for every request.
   */
  readonly fixedRatePath?: (i: number) => string;
  /**
   * When set, each variant is also loaded open-loop at these shares of its
   * own closed-loop requests/s (e.g. [0.5, 0.8]) with oha, latency counted
   * from each request's scheduled start (bench/lib/oha.ts). oha sends the
   * same header fields on every request; skipped with a note when oha is
   * not installed. `--open-loop RPS,...` replaces the shares with the same
   * absolute rates for every variant (bench/lib/open-loop-point.ts), with
   * these headers still sent (none for a scenario without `openLoop`).
   */
  readonly openLoop?: { readonly shares: readonly number[]; readonly headers?: Readonly<Record<string, string>> };
  /**
   * When set, the variants are gRPC servers and the harness loads them with
   * ghz (bench/lib/ghz.ts) instead of wrk: `connections` (or
   * `--connections`) is then ghz's concurrency, requests in flight at once.
   * `path`, `wrkLua`, `fixedRate` and `openLoop` do not apply.
   */
  readonly grpc?: GrpcLoad;
  /**
   * When true, the harness starts one upstream (bench/servers/gateway-upstream.ts)
   * per scenario run, pinned to the load generator's CPU, and hands its URL to
   * every variant as `FLOODGATE_BENCH_UPSTREAM_URL`: a proxy's CPU per request
   * then counts the proxy alone, and the upstream does not compete for its core.
   */
  readonly upstream?: boolean;
  /**
   * When set, the harness hands the whole run to this function instead of
   * measuring each variant with wrk or ghz: for a scenario whose load is not
   * a saturating loop (the overload scenario's open-loop phases with their own
   * upstream). The run lock, the copy of dist/ and the harness's pinning are
   * still the harness's; `variants` then only lists the parts for `npm run bench`.
   */
  readonly run?: (context: OwnRunContext) => Promise<OwnRunResult>;
}

/** Identity function that type-checks a scenario literal: `export default defineScenario({ ... })`. */
export function defineScenario(scenario: Scenario): Scenario {
  return scenario;
}
