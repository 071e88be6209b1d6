// One test upstream and one redis-server for a test file or suite, and the in-process gateways started against them.
import { startRedis, type RedisServer } from '../../support/redis-server.js';
import { gatewayFixture, type GatewayFixture } from './harness.js';

/** A {@link GatewayFixture} with a redis-server of its own. */
export interface RedisGatewayFixture extends GatewayFixture {
  /** The redis-server (available from the `before` hook on). */
  readonly redis: RedisServer;
}

/**
 * Registers `before`/`after` hooks in the current suite (or file) that start the upstream and a redis-server together,
 * and stop every gateway started, then the upstream, then the redis-server.
 */
export function redisGatewayFixture(): RedisGatewayFixture {
  let redis: RedisServer | undefined;
  const fixture = gatewayFixture({
    start: async () => {
      redis = await startRedis();
    },
    stop: async () => {
      await redis?.stop();
    },
  });
  return {
    get upstream() {
      return fixture.upstream;
    },
    get redis(): RedisServer {
      if (redis === undefined) throw new Error('the fixture redis-server starts in a before hook; use it inside tests');
      return redis;
    },
    start: (yaml, overrides, logLines) => fixture.start(yaml, overrides, logLines),
    ready: () => fixture.ready(),
  };
}
