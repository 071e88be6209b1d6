// Conformance suite and shared vectors on a real 3-master Redis Cluster, through ioredis Cluster, node-redis createCluster and valkey-glide GlideClusterClient.
import { runVectors } from '../vectors/format.js';
import { runConformance } from './suite.js';
import { useRedis, ioredisCluster, nodeRedisCluster, glideCluster } from './targets.js';

useRedis({ cluster: true });

runConformance('redis cluster (ioredis)', ioredisCluster);
runVectors('redis cluster (ioredis)', ioredisCluster);
runConformance('redis cluster (node-redis)', nodeRedisCluster);
runVectors('redis cluster (node-redis)', nodeRedisCluster);
runConformance('redis cluster (valkey-glide)', glideCluster);
runVectors('redis cluster (valkey-glide)', glideCluster);
