/** Parses a JSON text the way a cost reader must. */
/**
 * Where an object names a key twice, the larger value wins instead of the last.
 */

/** Deepest nesting parsed; a deeper text is refused (its usage is then missing) rather than risk the stack. */
const MAX_DEPTH = 256;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * `JSON.parse(text)`, except that a key an object holds twice keeps the
 * larger of its values (numbers: the larger; objects: merged key by key by
 * the same rule; null gives way to anything) rather than the last. JSON
 * leaves duplicate keys undefined and parsers differ (most keep the last,
 * some the first), so an upstream, or a client whose input it echoes, could
 * otherwise choose the smaller of two usages; the larger errs toward
 * charging more, never less. Plain `JSON.parse` is used when each of
 * `names` (the path's property names, quoted) occurs at most once: then no
 * key on the path is repeated. Throws a SyntaxError for a text that is not JSON.
 */
export function parseLargest(text: string, names: readonly string[]): unknown {
  if (names.length > 0 && names.every((name) => atMostOnce(text, name))) return JSON.parse(text);
  const parser = new Parser(text);
  const value = parser.value(0);
  parser.space();
  if (parser.at !== text.length) throw new SyntaxError('unexpected text after the JSON value');
  return value;
}

function atMostOnce(text: string, name: string): boolean {
  const first = text.indexOf(name);
  return first < 0 || text.indexOf(name, first + name.length) < 0;
}

/** The larger of two values of one key (see {@link parseLargest}). */
export function larger(a: unknown, b: unknown): unknown {
  if (a === undefined || a === null) return b;
  if (b === undefined || b === null) return a;
  if (typeof a === 'number' && typeof b === 'number') return Math.max(a, b);
  if (isRecord(a) && isRecord(b)) {
    const merged: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, a);
    for (const key of Object.keys(b)) merged[key] = Object.hasOwn(merged, key) ? larger(merged[key], b[key]) : b[key];
    return merged;
  }
  return b;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A small recursive-descent JSON parser; strings and numbers are decoded by JSON.parse itself, so they read exactly as it reads them. */
class Parser {
  at = 0;
  constructor(private readonly text: string) {}

  space(): void {
    const t = this.text;
    while (this.at < t.length) {
      const c = t.charCodeAt(this.at);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
      this.at += 1;
    }
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) throw new SyntaxError('JSON nested too deep');
    this.space();
    const c = this.text[this.at];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    for (const [word, value] of LITERALS)
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    NUMBER.lastIndex = this.at;
    const m = NUMBER.exec(this.text);
    if (m === null) throw new SyntaxError(`unexpected character at ${this.at}`);
    this.at += m[0].length;
    return Number(m[0]);
  }

  private string(): string {
    const t = this.text;
    let i = this.at + 1;
    while (i < t.length) {
      const c = t.charCodeAt(i);
      if (c === 0x5c) i += 2;
      else if (c === 0x22) break;
      else i += 1;
    }
    if (i >= t.length) throw new SyntaxError('unterminated string');
    const decoded = JSON.parse(t.slice(this.at, i + 1)) as string;
    this.at = i + 1;
    return decoded;
  }

  private object(depth: number): Record<string, unknown> {
    this.at += 1;
    const out = Object.create(null) as Record<string, unknown>;
    this.space();
    if (this.text[this.at] === '}') {
      this.at += 1;
      return out;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') throw new SyntaxError(`expected a key at ${this.at}`);
      const key = this.string();
      this.space();
      if (this.text[this.at] !== ':') throw new SyntaxError(`expected ':' at ${this.at}`);
      this.at += 1;
      const value = this.value(depth + 1);
      out[key] = Object.hasOwn(out, key) ? larger(out[key], value) : value;
      this.space();
      const next = this.text[this.at];
      this.at += 1;
      if (next === '}') return out;
      if (next !== ',') throw new SyntaxError(`expected ',' or '}' at ${this.at - 1}`);
    }
  }

  private array(depth: number): unknown[] {
    this.at += 1;
    const out: unknown[] = [];
    this.space();
    if (this.text[this.at] === ']') {
      this.at += 1;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.space();
      const next = this.text[this.at];
      this.at += 1;
      if (next === ']') return out;
      if (next !== ',') throw new SyntaxError(`expected ',' or ']' at ${this.at - 1}`);
    }
  }
}

const LITERALS: ReadonlyArray<readonly [string, unknown]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];
