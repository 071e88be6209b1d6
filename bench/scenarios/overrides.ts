/** Scenario overrides: the gateway with 10 000 per-key overrides loaded against the same gateway without, on memory and on Redis; the target is the server CPU per request. */
import { fileURLToPath } from 'node:url';
import { defineScenario, type Variant } from '../types.js';

const server = fileURLToPath(new URL('../servers/gateway.ts', import.meta.url));

function variant(name: string, description: string, mode: string, overrides: number, redis = false): Variant {
  return { name, description, server, env: { GATEWAY_MODE: mode, GATEWAY_OVERRIDES: String(overrides) }, redis };
}

/**
 * The gateway scenario's load (20 API keys in X-API-KEY, 3 per 5 s,
 * saturated, so nearly every answer is a decision and few are forwarded),
 * with and without 10 000 override entries: ten of the twenty keys sent
 * have one (4 per 5 s), plus ten `prefix*` patterns and 9 980 keys nobody
 * sends. Target: with the overrides, ≤ 1.05 × the server CPU per request
 * of the same store without.
 */
export default defineScenario({
  name: 'overrides',
  description: 'gateway, 20 API keys, 3 per 5 s, saturated: 10 000 per-key overrides loaded vs none, on memory and Redis',
  connections: 256,
  wrkLua: `
local keys = {}
for i = 1, 20 do keys[i] = "api-key-" .. i end
request = function()
  return wrk.format("GET", "/", { ["X-API-KEY"] = keys[math.random(1, 20)] })
end
`,
  variants: [
    variant('gateway-memory', 'floodgate serve, memory store, no overrides', 'memory', 0),
    variant('gateway-memory-10k', 'the same with 10 000 overrides loaded', 'memory', 10_000),
    variant('gateway-redis', 'floodgate serve --redis (RedisStore + in-memory block), no overrides', 'redis', 0, true),
    variant('gateway-redis-10k', 'the same with 10 000 overrides loaded', 'redis', 10_000, true),
  ],
});
