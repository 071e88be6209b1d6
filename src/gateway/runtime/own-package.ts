/** Where this copy of floodgate is installed. */
/**
 * Its own source file, package root, version, and the node_modules folders its imports search.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The file this module was loaded from. The same source compiles to ES
 * modules (which have `import.meta.url`) and CommonJS (which has
 * `__filename`); neither name compiles in the other build, but the first
 * call site of a stack trace names the file in both, and under tsx too.
 * The raw call sites are read, so a source map cannot turn the path into
 * one of an unshipped `src/` file.
 */
function ownFile(): string {
  const original = Error.prepareStackTrace;
  let name: string | undefined;
  try {
    Error.prepareStackTrace = (_error, sites) => sites;
    const sites = new Error().stack as unknown as NodeJS.CallSite[] | undefined;
    name = Array.isArray(sites) ? (sites[0]?.getFileName() ?? undefined) : undefined;
  } finally {
    Error.prepareStackTrace = original;
  }
  if (name === undefined) return join(process.cwd(), 'floodgate');
  return name.startsWith('file:') ? fileURLToPath(name) : name;
}

/** A package.json as read: only the fields floodgate looks at. */
export interface PackageJson {
  readonly name?: unknown;
  readonly version?: unknown;
}

/** Reads `file` as a package.json; undefined when it is missing or not JSON. */
export function readPackageJson(file: string): PackageJson | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as PackageJson) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * floodgate's package root: the nearest folder above this file whose
 * package.json is named floodgate. The build's dist/esm and dist/cjs hold
 * package.json files of their own (only a module type, no name), and the
 * depth differs between src/ and dist/*, so the walk checks the name.
 */
function floodgateRoot(from: string = ownFile()): string | undefined {
  let dir = dirname(from);
  for (;;) {
    const pkg = readPackageJson(join(dir, 'package.json'));
    if (pkg?.name === 'floodgate') return dir;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** floodgate's version from its package.json, or undefined when it cannot be read. */
export function floodgateVersion(from: string = ownFile()): string | undefined {
  const root = floodgateRoot(from);
  const version = root === undefined ? undefined : readPackageJson(join(root, 'package.json'))?.version;
  return typeof version === 'string' ? version : undefined;
}

/**
 * The node_modules folders a bare `import('name')` in this file searches,
 * nearest first: the same walk up the folders as Node's resolution.
 */
export function nodeModulesChain(from: string = ownFile()): string[] {
  const out: string[] = [];
  let dir = dirname(from);
  for (;;) {
    // A package's own node_modules/x/node_modules is searched, never node_modules/node_modules.
    if (basename(dir) !== 'node_modules') out.push(join(dir, 'node_modules'));
    const parent = dirname(dir);
    if (parent === dir) return out;
    dir = parent;
  }
}
