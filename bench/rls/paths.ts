/** Where the rls benchmark's outside tools live (built by bench/rls/build-reference.sh) and the files the scripts share. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchError } from '../lib/errors.js';
import { TOOL_CACHE_DIR } from '../lib/tool-cache.js';

/** The build script's output directory (see bench/lib/tool-cache.ts). */
export const CACHE_DIR = TOOL_CACHE_DIR;

/** envoyproxy/ratelimit's service binary. */
export const REFERENCE_BINARY = join(CACHE_DIR, 'ratelimit', 'bin', 'ratelimit');

/** The example configurations of envoyproxy/ratelimit's repository, from the source the binary was built from. */
export const REFERENCE_EXAMPLES = join(CACHE_DIR, 'ratelimit', 'src', 'examples', 'ratelimit', 'config');

/** The .proto directory floodgate ships (the RLS v3 service and what it imports): the client and ghz read it too. */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

/** The RLS v3 service's .proto, relative to {@link PROTO_DIR}. */
export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';

/** The repository root. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const BUILD_HINT = 'run `bash bench/rls/build-reference.sh` first (it builds envoyproxy/ratelimit and ghz into the cache directory)';

/** Throws with the build hint when `path` (one of the tools above) is missing. */
export function assertBuilt(path: string, what: string): string {
  if (!existsSync(path)) throw new BenchError(`${what} not found at ${path}: ${BUILD_HINT}`);
  return path;
}
