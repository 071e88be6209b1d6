// protobufjs over the shipped .proto files, the oracle the RLS codec tests hold the hand-written codec to, and their seeded PRNG.
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/** The shipped .proto files, loaded as the server loaded them before the codec (keepCase, well-known types from protobufjs). */
export function loadRoot(): protobuf.Root {
  const dir = fileURLToPath(new URL('../../../proto/', import.meta.url));
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string) => {
    if (isAbsolute(target)) return target;
    const inDir = join(dir, target);
    // protobufjs bundles the well-known google/protobuf types and uses them when a path is not found on disk.
    return existsSync(inDir) ? inDir : target;
  };
  root.loadSync(
    ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'].map((f) => join(dir, f)),
    { keepCase: true },
  );
  root.resolveAll();
  return root;
}

/** An enum's numbers by name. */
export function enumOf(root: protobuf.Root, name: string): Record<string, number> {
  return (root.lookup(name) as protobuf.Enum).values;
}

/** A seeded PRNG (mulberry32) in [0, 1): the same cases on every run, unlike Math.random. */
export function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
