/** The directory outside the repository where bench/rls/build-reference.sh builds tools the harness runs (ghz, envoyproxy/ratelimit). */
import { homedir } from 'node:os';
import { join } from 'node:path';

/** `$FLOODGATE_BENCH_CACHE`, else `~/.cache/floodgate-bench`. */
export const TOOL_CACHE_DIR = process.env.FLOODGATE_BENCH_CACHE || join(homedir(), '.cache', 'floodgate-bench');
