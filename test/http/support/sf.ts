// A strict Structured Field (RFC 9651) List and Dictionary parser, just enough to check the RateLimit header syntax in tests.

/** A bare item: Integer, Decimal, String, Token, Byte Sequence (as a Uint8Array) or Boolean. */
export type BareItem = number | string | boolean | Uint8Array | { token: string };

/** An Item with its Parameters. */
export interface Item {
  value: BareItem;
  params: Map<string, BareItem>;
}

/** Parses a List field value; throws on any syntax error, as a conforming recipient would fail the field. */
export function parseList(input: string): Item[] {
  const p = new Parser(input);
  p.skipSP();
  const members: Item[] = [];
  while (!p.done()) {
    if (p.peek() === '(') throw new Error('inner lists are not expected in RateLimit fields');
    members.push(p.item());
    p.skipOWS();
    if (p.done()) break;
    p.expect(',');
    p.skipOWS();
    if (p.done()) throw new Error('trailing comma');
  }
  return members;
}

/** Parses a Dictionary field value (draft-7 `RateLimit: limit=10, remaining=9, reset=1`). */
export function parseDictionary(input: string): Map<string, Item> {
  const p = new Parser(input);
  p.skipSP();
  const out = new Map<string, Item>();
  while (!p.done()) {
    const key = p.key();
    let value: BareItem = true;
    if (p.peek() === '=') {
      p.pos += 1;
      value = p.bareItem();
    }
    out.set(key, { value, params: p.params() });
    p.skipOWS();
    if (p.done()) break;
    p.expect(',');
    p.skipOWS();
    if (p.done()) throw new Error('trailing comma');
  }
  return out;
}

/** Parses a single Integer field (draft-6 `RateLimit-Limit: 10`). */
export function parseInteger(input: string): number {
  const p = new Parser(input);
  p.skipSP();
  const value = p.bareItem();
  p.skipSP();
  if (!p.done() || typeof value !== 'number' || !Number.isInteger(value)) throw new Error(`not an Integer: ${input}`);
  return value;
}

class Parser {
  pos = 0;
  constructor(private readonly s: string) {}

  done(): boolean {
    return this.pos >= this.s.length;
  }

  peek(): string | undefined {
    return this.s[this.pos];
  }

  expect(c: string): void {
    if (this.s[this.pos] !== c) throw new Error(`expected ${JSON.stringify(c)} at ${this.pos} in ${JSON.stringify(this.s)}`);
    this.pos += 1;
  }

  skipSP(): void {
    while (this.s[this.pos] === ' ') this.pos += 1;
  }

  skipOWS(): void {
    while (this.s[this.pos] === ' ' || this.s[this.pos] === '\t') this.pos += 1;
  }

  item(): Item {
    const value = this.bareItem();
    return { value, params: this.params() };
  }

  params(): Map<string, BareItem> {
    const params = new Map<string, BareItem>();
    while (this.peek() === ';') {
      this.pos += 1;
      this.skipSP();
      const key = this.key();
      let value: BareItem = true;
      if (this.peek() === '=') {
        this.pos += 1;
        value = this.bareItem();
      }
      params.set(key, value);
    }
    return params;
  }

  key(): string {
    const m = /^[a-z*][a-z0-9_\-.*]*/.exec(this.s.slice(this.pos));
    if (!m) throw new Error(`expected a key at ${this.pos} in ${JSON.stringify(this.s)}`);
    this.pos += m[0].length;
    return m[0];
  }

  bareItem(): BareItem {
    const c = this.peek();
    if (c === undefined) throw new Error('unexpected end');
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    if (c === '"') return this.string();
    if (c === ':') return this.bytes();
    if (c === '?') return this.boolean();
    if (/[A-Za-z*]/.test(c)) return this.token();
    throw new Error(`unexpected ${JSON.stringify(c)} at ${this.pos} in ${JSON.stringify(this.s)}`);
  }

  number(): number {
    const m = /^-?\d+(\.\d+)?/.exec(this.s.slice(this.pos));
    if (!m) throw new Error('bad number');
    const [whole, frac] = m[0].replace('-', '').split('.') as [string, string | undefined];
    if (frac === undefined ? whole.length > 15 : whole.length > 12 || frac.length > 3) throw new Error('number too long');
    this.pos += m[0].length;
    return Number(m[0]);
  }

  string(): string {
    this.expect('"');
    let out = '';
    for (;;) {
      const c = this.s[this.pos];
      if (c === undefined) throw new Error('unterminated string');
      this.pos += 1;
      if (c === '"') return out;
      if (c === '\\') {
        const next = this.s[this.pos];
        if (next !== '"' && next !== '\\') throw new Error('bad escape');
        out += next;
        this.pos += 1;
        continue;
      }
      const code = c.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) throw new Error('non-printable character in string');
      out += c;
    }
  }

  bytes(): Uint8Array {
    this.expect(':');
    const end = this.s.indexOf(':', this.pos);
    if (end < 0) throw new Error('unterminated byte sequence');
    const b64 = this.s.slice(this.pos, end);
    if (!/^[A-Za-z0-9+/=]*$/.test(b64)) throw new Error('bad byte sequence');
    this.pos = end + 1;
    return Uint8Array.from(Buffer.from(b64, 'base64'));
  }

  boolean(): boolean {
    this.expect('?');
    const c = this.s[this.pos];
    if (c !== '0' && c !== '1') throw new Error('bad boolean');
    this.pos += 1;
    return c === '1';
  }

  token(): { token: string } {
    const m = /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*/.exec(this.s.slice(this.pos));
    this.pos += m![0].length;
    return { token: m![0] };
  }
}
