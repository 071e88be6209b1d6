// The TypeScript in the docs compiles as written: every ```ts block of docs/http/*.md and README.md is type-checked with tsc --strict against the built package's types, under moduleResolution bundler and node16.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = existsSync(`${root}dist/esm/index.d.ts`);

/** Marks a block that is not meant to compile on its own; put it on the line before the fence. */
const NOT_COMPILED = /<!--\s*not compiled\b[^>]*-->\s*$/;

/**
 * README blocks known to be fragments (they use a `res` and a `userId` from
 * around them), matched by a line they contain, for as long as they carry no
 * `<!-- not compiled: fragment -->` marker.
 */
/** A ```ts block: where it is, and its code with the list indentation removed. */
interface Snippet {
  readonly page: string;
  readonly line: number;
  readonly code: string;
}

/** The ```ts blocks of a Markdown page meant to compile: fenced at any indentation, without a "not compiled" comment before them. */
function snippets(page: string): Snippet[] {
  const text = readFileSync(`${root}${page}`, 'utf8');
  const lines = text.split('\n');
  const out: Snippet[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = /^( *)```ts\s*$/.exec(lines[i]!);
    if (open === null) continue;
    const indent = open[1]!;
    const start = i;
    const body: string[] = [];
    for (i += 1; i < lines.length && lines[i] !== `${indent}\`\`\``; i += 1) body.push(lines[i]!.slice(indent.length));
    let before = start - 1;
    while (before >= 0 && lines[before]!.trim() === '') before -= 1;
    if (before >= 0 && NOT_COMPILED.test(lines[before]!)) continue;
    const code = body.join('\n');
    out.push({ page, line: start + 1, code });
  }
  return out;
}

/** `paths` that map each of the package's subpaths to its built declarations, as an installed package would resolve them. */
function packagePaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
    name: string;
    exports: Record<string, string | { import?: { types?: string } }>;
  };
  const paths: Record<string, string[]> = {};
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = typeof target === 'object' ? target.import?.types : undefined;
    if (types === undefined) continue;
    paths[subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`] = [`${root}${types.slice(2)}`];
  }
  return paths;
}

/**
 * How a reader's project resolves modules: `bundler` (Vite, esbuild, tsx), or `node16` (Node's own ESM rules, where
 * a CommonJS package's default export is its whole `module.exports`: `import Redis from 'ioredis'` is then not
 * constructible, TS2351, while `import { Redis } from 'ioredis'` is).
 */
type Resolution = 'bundler' | 'node16';

/** The module settings of each {@link Resolution}. */
const MODULE_SETTINGS: Record<Resolution, { module: string; moduleResolution: string }> = {
  bundler: { module: 'ESNext', moduleResolution: 'Bundler' },
  node16: { module: 'Node16', moduleResolution: 'Node16' },
};

/** Type-checks the files with tsc --strict; resolves with tsc's output (empty when they compile). */
async function typeCheck(files: Map<string, string>, resolution: Resolution = 'bundler'): Promise<string> {
  // Inside the project so that `express`, `fastify`, … resolve from its node_modules, as in an app that installed them.
  const dir = mkdtempSync(`${root}.docs-types-`);
  try {
    for (const [name, code] of files) writeFileSync(`${dir}/${name}`, code);
    const compilerOptions = {
      target: 'ES2022',
      lib: ['ES2022'],
      ...MODULE_SETTINGS[resolution],
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      esModuleInterop: true,
      types: ['node'],
      typeRoots: [`${root}node_modules/@types`],
      paths: packagePaths(),
    };
    writeFileSync(`${dir}/tsconfig.json`, JSON.stringify({ compilerOptions, files: [...files.keys()] }));
    const tsc = [`${root}node_modules/typescript/bin/tsc`, '-p', `${dir}/tsconfig.json`, '--pretty', 'false'];
    return await new Promise<string>((resolve) => {
      execFile(process.execPath, tsc, { cwd: dir }, (_error, stdout, stderr) => resolve(`${stdout}${stderr}`.trim()));
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Each snippet as a module of its own (`export {}` makes one of a snippet without imports), named for where it comes from. */
function asFiles(list: readonly Snippet[]): Map<string, string> {
  const files = new Map<string, string>();
  for (const s of list) {
    const name = `${s.page.replace(/[^A-Za-z0-9]+/g, '_')}_line${s.line}.ts`;
    files.set(name, `${s.code}\nexport {};\n`);
  }
  return files;
}

describe('TypeScript in the docs', { skip: built ? false : 'dist/ is not built; run `node scripts/build.mjs`' }, () => {
  it('a block after a "not compiled" comment is left out', () => {
    const page = mkdtempSync(`${root}.docs-types-page-`);
    try {
      writeFileSync(`${page}/x.md`, '<!-- not compiled: fragment -->\n\n```ts\nres.end();\n```\n\n```ts\nconst ok = 1;\n```\n');
      assert.deepEqual(
        snippets(`${page.slice(root.length)}/x.md`).map((s) => s.code),
        ['const ok = 1;'],
      );
    } finally {
      rmSync(page, { recursive: true, force: true });
    }
  });

  it('every ```ts block of docs/http/*.md and README.md compiles under --strict, with bundler and node16 resolution (the typed Express pattern among them)', async () => {
    const pages = [
      ...readdirSync(`${root}docs/http`)
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/http/${f}`),
      'README.md',
    ];
    const list = pages.flatMap(snippets);
    assert.ok(
      list.some((s) => s.page === 'docs/http/express.md' && s.code.includes('rateLimit<AuthedRequest>')),
      'the typed Express pattern is among the checked blocks',
    );
    for (const resolution of ['bundler', 'node16'] as const) {
      const output = await typeCheck(asFiles(list), resolution);
      assert.equal(output, '', `tsc --strict (moduleResolution ${resolution}) on the docs' TypeScript:\n${output}`);
    }
  });

  it("README's Redis snippet under moduleResolution node16: the default import of ioredis is not constructible (TS2351), the named one is", async () => {
    const [snippet] = snippets('README.md').filter((s) => s.code.includes("from 'ioredis'"));
    assert.ok(snippet !== undefined, 'README.md has a ```ts block that imports ioredis');
    assert.match(snippet.code, /^import \{ Redis \} from 'ioredis';$/m, 'the README imports { Redis } from ioredis');
    const defaultImport = snippet.code.replace("import { Redis } from 'ioredis';", "import Redis from 'ioredis';");
    const output = await typeCheck(new Map([['readme-default-import.ts', `${defaultImport}\nexport {};\n`]]), 'node16');
    assert.match(output, /TS2351/, `the default import compiled under node16, so this check no longer tells the forms apart:\n${output}`);
  });

  it("Fastify's config.rateLimit is typed: options and false compile; a wrong type does not, nor a misspelt option under satisfies", async () => {
    const code = `
import Fastify from 'fastify';
import { RateLimiter } from 'floodgate';
import { rateLimit, type FastifyRouteRateLimit } from 'floodgate/fastify';

const app = Fastify();
await app.register(rateLimit, { limiter: new RateLimiter({ limit: 100, window: '1m' }) });
const limiter = new RateLimiter({ limit: 1, window: '1s', prefix: 'a' });
app.get('/a', { config: { rateLimit: { limiter, key: (request) => request.ip } } }, async () => 'ok');
app.get('/b', { config: { rateLimit: false } }, async () => 'ok');
app.get('/c', { config: { rateLimit: { limiter } satisfies FastifyRouteRateLimit } }, async () => 'ok');
// @ts-expect-error a value of the wrong type
app.get('/d', { config: { rateLimit: { limiter, statusCode: '429' } } }, async () => 'ok');
// @ts-expect-error a key callback that is not one
app.get('/e', { config: { rateLimit: { limiter, key: 42 } } }, async () => 'ok');
// @ts-expect-error a misspelt option, where Fastify does not infer the route's config type from the literal
app.get('/f', { config: { rateLimit: { limitr: limiter } satisfies FastifyRouteRateLimit } }, async () => 'ok');
// @ts-expect-error @fastify/rate-limit's option names are not floodgate's
const migrated: FastifyRouteRateLimit = { max: 5 };
void migrated;
`;
    const output = await typeCheck(new Map([['fastify-config.ts', code]]));
    assert.equal(output, '', `tsc --strict:\n${output}`);
  });
});
