/** docs/http/side-by-side.md: floodgate's version of each common task (the dry run included) is no longer than the shortest peer's, and the page's line-count table says what its examples hold. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const LIBRARIES = ['floodgate', 'express-rate-limit', 'rate-limiter-flexible', '@upstash/ratelimit'];
const page = readFileSync(new URL('../../docs/http/side-by-side.md', import.meta.url), 'utf8');

/** Each task's examples, counted as the page says: non-blank lines, imports included, `declare` lines (the app's own lookups) left out. */
function tasks(): Array<{ title: string; lines: Map<string, number> }> {
  const out: Array<{ title: string; lines: Map<string, number> }> = [];
  for (const section of page.split('\n## ').slice(1)) {
    const title = section.slice(0, section.indexOf('\n'));
    if (title === 'Line counts') continue;
    const lines = new Map<string, number>();
    for (const m of section.matchAll(/<!-- library: (\S+) -->\s*```(?:ts|js)\n([\s\S]*?)```/g)) {
      const code = m[2]!.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('declare '));
      lines.set(m[1]!, code.length);
    }
    out.push({ title, lines });
  }
  return out;
}

test('every task of the line-count table, each written with every library', () => {
  const found = tasks();
  const rows = page
    .slice(page.indexOf('## Line counts'))
    .split('\n')
    .filter((l) => /^\| \d+\. /.test(l));
  assert.ok(found.length >= 6, `${found.length} tasks`);
  assert.equal(found.length, rows.length, 'one line-count row per task');
  for (const { title, lines } of found) assert.deepEqual([...lines.keys()], LIBRARIES, title);
});

test("floodgate's version of each task is no longer than the shortest of the others", () => {
  for (const { title, lines } of tasks()) {
    const others = LIBRARIES.slice(1).map((l) => lines.get(l)!);
    assert.ok(
      lines.get('floodgate')! <= Math.min(...others),
      `${title}: floodgate ${lines.get('floodgate')} lines, shortest peer ${Math.min(...others)}`,
    );
  }
});

test("the page's line-count table matches its examples", () => {
  for (const { title, lines } of tasks()) {
    const row = `| ${title} | ${LIBRARIES.map((l) => lines.get(l)).join(' | ')} |`;
    assert.ok(page.includes(row), `missing or stale row: ${row}`);
  }
});
