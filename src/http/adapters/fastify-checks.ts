/** Checks the Fastify plugin makes of the instance it is registered on. */
/**
 * A supported Fastify version, and routes added before it (which it cannot limit).
 */
import { ErrorCode, FloodgateError } from '../../core/errors.js';

/** The Fastify majors the plugin supports. */
const FASTIFY_MAJORS: readonly number[] = [4, 5];

/**
 * Throws MISSING_DEPENDENCY unless `version` (the instance's
 * `fastify.version`) is a supported major: Fastify 3 runs hooks and route
 * options differently, and the plugin would fail in ways that do not say why.
 */
export function checkFastifyVersion(version: unknown, owner: string): void {
  const major = typeof version === 'string' ? Number(/^(\d+)\./.exec(version)?.[1]) : NaN;
  if (FASTIFY_MAJORS.includes(major)) return;
  throw new FloodgateError(
    ErrorCode.MISSING_DEPENDENCY,
    `${owner} needs fastify 4 or 5; found fastify ${typeof version === 'string' ? version : 'of an unknown version'}. Upgrade it: npm install fastify@5.`,
  );
}

/**
 * The routes (`"GET /a"`) in `tree`, Fastify's `printRoutes()` text, whose
 * path lies under `prefix` (the plugin's context: routes elsewhere are not
 * its business). The tree prints one node per line, indented four columns a
 * level, each node's text continuing its parent's path, with its methods in
 * parentheses when a route ends there.
 */
export function routesBefore(tree: string, prefix: string): string[] {
  const out: string[] = [];
  const paths: string[] = [];
  for (const line of tree.split('\n')) {
    const node = /^((?:[│|] {3}| {4})*)[├└]── (.*)$/u.exec(line);
    if (node === null) continue;
    const depth = node[1]!.length / 4;
    const text = /^(.*?)(?: \(([^()]*)\))?$/.exec(node[2]!)!;
    const path = (paths[depth - 1] ?? '') + text[1]!;
    paths[depth] = path;
    paths.length = depth + 1;
    if (text[2] === undefined || !path.startsWith(prefix)) continue;
    // An automatic HEAD route comes with each GET; naming it would only repeat the GET.
    const methods = text[2].split(', ').filter((m) => m !== 'HEAD' || !text[2]!.includes('GET'));
    for (const method of methods) out.push(`${method} ${path}`);
  }
  return out;
}
