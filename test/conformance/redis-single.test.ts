// Conformance suite and shared vectors on a real single-node Redis, through ioredis, node-redis and valkey-glide.
import { runVectors } from '../vectors/format.js';
import { runConformance } from './suite.js';
import { useRedis, ioredisSingle, nodeRedisSingle, glideSingle } from './targets.js';

useRedis({ single: true });

runConformance('redis (ioredis)', ioredisSingle);
runVectors('redis (ioredis)', ioredisSingle);
runConformance('redis (node-redis)', nodeRedisSingle);
runVectors('redis (node-redis)', nodeRedisSingle);
runConformance('redis (valkey-glide)', glideSingle);
runVectors('redis (valkey-glide)', glideSingle);
