// Types of scripts/test-prereqs.mjs for the tests that import it.
/** Path of the Node.js 22 binary the SO_REUSEPORT tests run the gateway under. */
export const NODE22_BINARY: string;
/** Installs the system programs the tests start, or exits 1 naming the command that would. */
export function ensureTestPrograms(): void;
/** Fetches {@link NODE22_BINARY} when missing (Linux x64). */
export function ensureNode22(): void;
/** Path of ghz, the Go gRPC client the rate limit service's tests call it with. */
export const GHZ_BINARY: string;
/** Builds {@link GHZ_BINARY} from its Go module when missing. */
export function ensureGhz(): void;
