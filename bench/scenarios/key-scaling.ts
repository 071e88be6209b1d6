/** Scenario key-scaling: server CPU per request with 1 000 vs 1 000 000 live keys (half of them blocked), for the memory store with the in-memory block and for the gateway. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/key-scaling.ts', import.meta.url));

/** One variant of bench/servers/key-scaling.ts. */
function variant(mode: 'memory' | 'gateway', keys: 1000 | 1_000_000, description: string): Variant {
  return {
    name: `${mode}-${keys === 1000 ? '1k' : '1m'}`,
    description,
    server,
    env: { KEY_SCALING_MODE: mode, KEY_SCALING_KEYS: String(keys) },
  };
}

/**
 * Every per-key structure (the stores' tables, the block list, the lapse
 * probes, the gateway's rule tables) must cost O(1) amortised per operation
 * whatever the number of keys. Each server pre-fills its keys before it says
 * ready: `k<i>` for even i blocked for an hour, for odd i consumed once, under
 * a limit no key reaches in a run, so the mix of outcomes (half refused, half
 * admitted) is the same at both sizes. wrk picks i uniformly in [0, 10^6) and
 * sends `X-Key-1m: k<i>` and `X-Key-1k: k<i mod 1000>` on every request, so
 * the bytes on the wire are the same too; each variant reads its own field.
 *
 * Compare the µs/req column of each pair (target: the 1m row ≤ 1.3 × its 1k
 * row). The ratio column's baseline is memory-1k; the gateway rows also
 * forward their admitted half to an upstream child, whose CPU is counted.
 */
export default defineScenario({
  name: 'key-scaling',
  description: 'server CPU per request with 1 000 vs 1 000 000 live keys, half blocked: memory store + in-memory block, and the gateway',
  connections: 64,
  wrkLua: `
request = function()
  local i = math.random(0, 999999)
  return wrk.format("GET", "/", { ["X-Key-1m"] = "k" .. i, ["X-Key-1k"] = "k" .. (i % 1000) })
end
`,
  variants: [
    variant('memory', 1000, 'node:http, MemoryStore + in-memory block, 1 000 live keys'),
    variant('memory', 1_000_000, 'node:http, MemoryStore + in-memory block, 1 000 000 live keys'),
    variant('gateway', 1000, 'floodgate serve (memory store, in-memory block), 1 000 live keys'),
    variant('gateway', 1_000_000, 'floodgate serve (memory store, in-memory block), 1 000 000 live keys'),
  ],
});
