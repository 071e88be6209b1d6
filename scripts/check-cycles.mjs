// Finds import loops among src/**/*.ts (type-only imports and re-exports included): prints each loop and exits 1 when there is one.
// With --layers: lists instead every import from one folder up to a higher one (LIBRARY_FLOORS in src/, GATEWAY_FLOORS in src/gateway/), and exits 1 when there is one.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Every .ts file under dir (declaration files left out: they import nothing of ours). */
function sources(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

// `import … from '…'`, `import type …`, `export … from '…'`, `import('…')` and bare `import '…'`: a loop through a type is still a loop,
// because the two files can then only be understood, moved or split together.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;

/** The files a file imports, resolved to paths under src (the `.js` the ESM build needs names a `.ts` here). */
function importsOf(file, known) {
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
  const out = new Set();
  for (const match of text.matchAll(SPECIFIER)) {
    const target = resolve(dirname(file), match[1]);
    for (const candidate of [target.replace(/\.js$/, '.ts'), `${target}.ts`, join(target, 'index.ts')]) {
      if (known.has(candidate)) {
        out.add(candidate);
        break;
      }
    }
  }
  return out;
}

/** The import graph's strongly connected components of more than one file (or a file that imports itself): Tarjan's algorithm. */
export function importLoops(dir = join(root, 'src')) {
  const files = sources(dir);
  const known = new Set(files);
  const edges = new Map(files.map((file) => [file, importsOf(file, known)]));
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const loops = [];
  const visit = (file) => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of edges.get(file)) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file), low.get(target)));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file), index.get(target)));
    }
    if (low.get(file) !== index.get(file)) return;
    const part = [];
    let top;
    do {
      top = stack.pop();
      onStack.delete(top);
      part.push(top);
    } while (top !== file);
    if (part.length > 1 || edges.get(file).has(file)) loops.push(part.map((p) => relative(root, p)).sort());
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return loops;
}

/**
 * The gateway's folders, bottom to top: a file imports only its own folder or a lower one (type imports included), so each floor can be
 * read and tested with only what is under it. runtime/ is the shared infrastructure (logger, metrics, optional packages, ipc); store/ is
 * the one place stores are wired; admin/ is the admin API and dashboard; serve/ the proxy path. Files at the gateway's root (index.ts) sit on top.
 */
export const GATEWAY_FLOORS = ['runtime', 'config', 'rules', 'store', 'admin', 'serve', 'rls', 'workers', 'cli'];

/**
 * The library's floors, bottom to top: the vocabulary (core), small data structures (util), the pure algorithms, the in-process
 * guards, the stores, waiting, the limiters, telemetry around them, outbound scheduling (egress), the HTTP middleware, then the files at src/'s root (the
 * public entry points, `.` here), and the gateway on top: it is the library's client and reaches it through those entry points.
 */
export const LIBRARY_FLOORS = [
  'core',
  'util',
  'algorithms',
  'guards',
  'stores',
  'waiting',
  'limiter',
  'telemetry',
  'egress',
  'http',
  '.',
  'gateway',
];

/**
 * A file's floor under base: its first folder's index in floors; for a file at base's root, the index of `.` in floors, or above them
 * all when `.` is not listed; undefined for a folder not listed.
 */
function floorOf(file, base, floors) {
  const parts = relative(base, file).split(/[\\/]/);
  if (parts.length === 1) return floors.includes('.') ? floors.indexOf('.') : floors.length;
  const floor = floors.indexOf(parts[0]);
  return floor === -1 ? undefined : floor;
}

/** Every import from a file under base to a file on a higher floor, or in or from a folder floors does not place, as `from -> to` lines. */
export function upwardImports(base = join(root, 'src', 'gateway'), floors = GATEWAY_FLOORS) {
  const files = sources(base);
  const known = new Set(files);
  const out = [];
  for (const file of files) {
    for (const target of importsOf(file, known)) {
      const [from, to] = [floorOf(file, base, floors), floorOf(target, base, floors)];
      if (from === undefined || to === undefined || to > from) out.push(`${relative(root, file)} -> ${relative(root, target)}`);
    }
  }
  return out.sort();
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url) && process.argv.includes('--layers')) {
  const library = upwardImports(join(root, 'src'), LIBRARY_FLOORS);
  const gateway = upwardImports(join(root, 'src', 'gateway'), GATEWAY_FLOORS);
  for (const line of [...library, ...gateway]) console.log(`upward import: ${line}`);
  console.log(`check-cycles --layers: ${library.length} upward imports between library folders (${LIBRARY_FLOORS.join(' < ')})`);
  console.log(`check-cycles --layers: ${gateway.length} upward imports between gateway folders (${GATEWAY_FLOORS.join(' < ')})`);
  process.exitCode = library.length + gateway.length === 0 ? 0 : 1;
} else if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const loops = importLoops();
  for (const loop of loops) console.log(`import loop (${loop.length} files): ${loop.join(' ')}`);
  console.log(loops.length === 0 ? 'check-cycles: no import loops in src/' : `check-cycles: ${loops.length} import loops in src/`);
  process.exitCode = loops.length === 0 ? 0 : 1;
}
