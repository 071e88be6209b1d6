/** Reads the cost an upstream response reports from the chunks as they pass, in bounded memory. */
/**
 * The cost is a header, the JSON body's field, or a streamed response's largest usage event. Also says when a response
 * that should report one did not.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { WarningCode, type WarningCodeValue } from '../../core/warnings.js';
import type { UsageSource } from '../config/settings.js';
import { larger, parseLargest } from './json-largest.js';

/** Largest JSON body kept to find its usage field; a larger body is relayed whole but charged `cost.missing`. */
export const MAX_JSON_BYTES = 1024 * 1024;
/**
 * Bytes of JSON bodies all readers of the process keep at once: past it a
 * body is relayed unread and charged `cost.missing`, so answers of just under
 * {@link MAX_JSON_BYTES} on every connection cannot hold
 * `proxy.maxConnections` MiB between them.
 */
const MAX_JSON_BYTES_KEPT = 64 * 1024 * 1024;
/** Bytes the readers of this process keep now (see {@link MAX_JSON_BYTES_KEPT}). */
let keptNow = 0;

/** Longest SSE line (and event data) kept; a longer one is skipped to its end, so a never-ending line holds no more than this. */
export const MAX_SSE_LINE_BYTES = 64 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/** Emits a one-time warning about a rule's responses (see warnings.ts); the caller also logs it. */
export type UsageWarn = (code: WarningCodeValue, message: string) => void;

/** How the body is read, decided from the response head. */
type Mode = 'none' | 'json' | 'sse';

/**
 * Watches one response for the cost it reports. The proxy hands it the
 * head, then every body chunk as it is written to the client (nothing is
 * delayed or copied for the client), and asks {@link usage} once the
 * response has been written whole. Memory stays bounded whatever the
 * upstream sends: a JSON body is kept up to {@link MAX_JSON_BYTES}, an SSE
 * stream one line (at most {@link MAX_SSE_LINE_BYTES}) and one event's data
 * at a time, and only the last usage seen.
 */
export class UsageReader {
  private mode: Mode = 'none';
  /** The usage as found (header text or JSON value), checked only when asked for. */
  private found: unknown;
  private chunks: Buffer[] = [];
  private kept = 0;
  /** Bytes of the SSE line being read, when it spans chunks. */
  private line: Buffer[] = [];
  private lineBytes = 0;
  /** True when the last chunk ended in CR: an LF opening the next one ends no second line. */
  private afterCr = false;
  /** True while the rest of an over-long SSE line is skipped. */
  private skipping = false;
  /** The data lines of the SSE event being read. */
  private eventData: string[] = [];
  private dataBytes = 0;
  /** True when the event being read has more data than is kept: it is dropped whole. */
  private dropping = false;
  /** True when the response should report a cost: a 2xx (not 204) with a body, or any 2xx for a header source. */
  private expected = false;
  /** Why a body that should report a cost cannot be read (compressed, a partial range, too large); undefined while it can. */
  private unreadable: string | undefined;
  /** True once the head was seen: a response the gateway answered itself (502, 503, 504) has none, and keeps the estimate. */
  private headSeen = false;
  /** Set once the cost is known (a header) or the body was read whole: {@link usage} then answers from {@link result}. */
  private ended = false;
  /** True once the body was read whole. */
  private whole = false;
  private result: number | undefined;
  /** The path's last property name, quoted: an event whose data does not hold it is not parsed. */
  private readonly needle: string;
  /** The path's property names, quoted, when it has no array index: a text naming each at most once needs no duplicate-key parse. */
  private readonly names: readonly string[];

  /**
   * @param source - where the cost is reported
   * @param rule - the rule's name, for warnings
   * @param warn - where warnings about the rule's responses go
   */
  constructor(
    private readonly source: UsageSource,
    private readonly rule: string,
    private readonly warn: UsageWarn,
  ) {
    // An array index is not quoted in JSON: the nearest property name serves, or none (every event is parsed).
    const name = source.kind === 'json' ? [...source.path].reverse().find((segment) => !/^\d+$/.test(segment)) : undefined;
    this.needle = name === undefined ? '' : `"${name}"`;
    this.names = source.kind === 'json' && source.path.every((segment) => !/^\d+$/.test(segment)) ? source.path.map((n) => `"${n}"`) : [];
  }

  /**
   * The upstream's status and headers: a header source is read here (and
   * counts even if the body is cut later: the upstream said it before the
   * work was sent); a JSON one picks how to read the body. `bodiless` for
   * an answer without a body (to HEAD): a 2xx one is charged `cost.missing`,
   * since Express and node:http run the GET handler for HEAD, so the upstream
   * may have done the work a body would have reported.
   */
  head(status: number, headers: IncomingHttpHeaders, bodiless = false): void {
    this.headSeen = true;
    this.expected = status >= 200 && status < 300 && status !== 204;
    if (this.source.kind === 'header') {
      this.found = headers[this.source.header];
      if (this.found !== undefined) this.result = this.checked(this.found);
      this.ended = this.found !== undefined;
      return;
    }
    if (!this.expected) return;
    if (bodiless) {
      this.unreadable = 'an answer to HEAD, which has no body to report the usage in';
      return;
    }
    const encoding = headers['content-encoding'];
    if (encoding !== undefined && encoding !== 'identity') {
      this.unreadable = `a ${String(encoding)}-encoded body, which the gateway does not decode`;
      this.warn(
        WarningCode.COST_RESPONSE_ENCODED,
        `rule ${JSON.stringify(this.rule)} reads its cost from the response body, but the upstream sent it ${String(encoding)}-encoded although the gateway asked for identity, and it is not decoded: such responses are charged cost.missing. Have the upstream report the cost in a header (cost: { header: … }), or not compress these responses.`,
      );
      return;
    }
    // A part of the body, chosen by the client's Range (the gateway drops Range, but an upstream may answer one it
    // read elsewhere): the part may leave out the usage, so it counts as unread.
    if (status === 206) {
      this.unreadable = 'a partial body (206), which may leave the usage out';
      return;
    }
    const type = String(headers['content-type'] ?? '').toLowerCase();
    if (type.startsWith('text/event-stream')) this.mode = 'sse';
    else if (type.includes('json')) this.mode = 'json';
  }

  /** One body chunk, as it goes to the client. */
  data(chunk: Buffer): void {
    if (this.mode === 'json') this.keepJson(chunk);
    else if (this.mode === 'sse') this.readSse(chunk);
  }

  /**
   * Ends the reading once the body has been passed on whole, and returns
   * the cost the response reported: undefined when it reported none, or one
   * that is not a whole number ≥ 0 (warned once per rule). Later calls
   * return the same answer.
   */
  usage(): number | undefined {
    if (this.ended) return this.result;
    this.ended = true;
    this.whole = true;
    if (this.mode === 'json' && this.chunks.length > 0) {
      try {
        this.found = at(parseLargest(Buffer.concat(this.chunks).toString('utf8'), this.names), this.source);
      } catch {
        this.found = undefined;
      }
      this.discard();
    } else if (this.mode === 'sse') {
      if (this.line.length > 0 && !this.skipping) this.sseLine(Buffer.concat(this.line).toString('utf8'));
      this.endEvent();
    }
    this.result = this.unreadable === undefined ? this.checked(this.found) : undefined;
    return this.result;
  }

  /** The largest usage seen so far when it is a whole number, read whole or not: a body cut after reporting one is charged at least that. */
  seen(): number | undefined {
    return typeof this.found === 'number' && Number.isSafeInteger(this.found) && this.found >= 0 ? this.found : undefined;
  }

  /** What the response reported: a header source's value from the head, a body's once read whole; undefined otherwise. */
  reported(): number | undefined {
    return this.result;
  }

  /**
   * Why this response is charged `cost.missing`, or undefined when it is
   * not: a response that should report a cost (a 2xx with a head from the
   * upstream, a body for a JSON source) and did not, because no usage was
   * in it, its body could not be read (compressed, a partial range, too
   * large), or it was cut short (the upstream failed mid-body, or the
   * client left and the rest of it could not be drained within
   * `cost.drainBytes` and the upstream timeouts). A non-2xx, a 204 or a
   * HEAD keeps the estimate; so does a usage that is not a whole number
   * (already warned as invalid): that is the upstream's bug, not a way for
   * a client to hide its usage.
   */
  missingReason(): string | undefined {
    if (!this.headSeen || !this.expected || this.result !== undefined) return undefined;
    // A value that was read but is not a whole number: the invalid-usage warning said so, and the estimate stays.
    if (this.found !== undefined && this.found !== null && (this.whole || this.source.kind === 'header')) return undefined;
    if (this.unreadable !== undefined) return this.unreadable;
    if (!this.whole && this.source.kind === 'json') return 'a body cut short before its usage was read';
    if (this.source.kind === 'header') return `no ${this.source.header} header`;
    if (this.mode === 'none') return 'a body that is neither JSON nor an event stream';
    return `no ${this.source.path.join('.')} field in its ${this.mode === 'sse' ? 'event stream' : 'JSON body'}`;
  }

  private keepJson(chunk: Buffer): void {
    if (this.kept < 0) return;
    if (this.kept + chunk.length > MAX_JSON_BYTES) {
      this.drop('a JSON body too large to read');
      this.tooLarge(`its JSON body is larger than ${MAX_JSON_BYTES} bytes`);
      return;
    }
    if (keptNow + chunk.length > MAX_JSON_BYTES_KEPT) {
      this.drop('a JSON body the process had no room left to read');
      this.tooLarge(`the gateway already keeps ${MAX_JSON_BYTES_KEPT / 1024 / 1024} MiB of JSON bodies being read at once`);
      return;
    }
    this.kept += chunk.length;
    keptNow += chunk.length;
    this.chunks.push(chunk);
  }

  /**
   * The response is over (finished, cut or its client gone): whatever of its
   * body was kept is let go, and counts no more against the process's share.
   */
  discard(): void {
    if (this.kept > 0) {
      keptNow -= this.kept;
      this.kept = 0;
    }
    this.chunks = [];
  }

  /** Stops keeping a body that will not be read: the request is charged `cost.missing`. */
  private drop(why: string): void {
    this.discard();
    this.kept = -1;
    this.unreadable = why;
  }

  /**
   * Splits the stream into lines on CRLF, LF or a lone CR (the three line
   * ends the event-stream format allows; a CRLF split across chunks is one
   * end); each complete line is handled at once. Reading only LF would make
   * a CR-ended stream one over-long line, and its usage would be missed.
   */
  private readSse(chunk: Buffer): void {
    let from = 0;
    if (this.afterCr) {
      this.afterCr = false;
      if (chunk[0] === LF) from = 1;
    }
    // Where the next CR and LF are, each searched for again only once passed, so a chunk is scanned in one pass.
    let cr = -2;
    let lf = -2;
    while (from < chunk.length) {
      if (cr !== -1 && cr < from) cr = chunk.indexOf(CR, from);
      if (lf !== -1 && lf < from) lf = chunk.indexOf(LF, from);
      const eol = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      const end = eol < 0 ? chunk.length : eol;
      if (!this.skipping) {
        this.lineBytes += end - from;
        if (this.lineBytes > MAX_SSE_LINE_BYTES) {
          this.skipping = true;
          this.line = [];
          this.tooLarge(`a line of its event stream is longer than ${MAX_SSE_LINE_BYTES} bytes`);
        } else if (end > from) this.line.push(chunk.subarray(from, end));
      }
      if (eol < 0) return;
      if (!this.skipping) this.sseLine((this.line.length === 1 ? this.line[0]! : Buffer.concat(this.line)).toString('utf8'));
      this.line = [];
      this.lineBytes = 0;
      this.skipping = false;
      from = eol + 1;
      if (eol === cr) {
        if (from === chunk.length) this.afterCr = true;
        else if (chunk[from] === LF) from += 1;
      }
    }
  }

  /** One SSE line: `data:` lines make up the event, an empty line ends it, anything else (event:, id:, comments) is ignored. */
  private sseLine(text: string): void {
    if (text === '') {
      this.endEvent();
      return;
    }
    if (!text.startsWith('data:')) return;
    if (this.dropping) return;
    const value = text.charCodeAt(5) === 0x20 ? text.slice(6) : text.slice(5);
    this.dataBytes += value.length;
    if (this.dataBytes > MAX_SSE_LINE_BYTES) {
      // An event made of many short data lines is as unbounded as one long line.
      this.eventData = [];
      this.dropping = true;
      this.tooLarge(`an event of its event stream holds more than ${MAX_SSE_LINE_BYTES} bytes of data`);
      return;
    }
    this.eventData.push(value);
  }

  /**
   * An event is complete: when its data is JSON holding the usage field, the
   * larger of it and any usage seen before is kept. Streams report a running
   * total (OpenAI once at the end, Anthropic growing with each delta), so the
   * largest is the last of an honest stream, and no event can lower it.
   */
  private endEvent(): void {
    const data = this.eventData.join('\n');
    this.eventData = [];
    this.dataBytes = 0;
    this.dropping = false;
    // Most events of a stream carry text, not the usage: parse only those that name the field.
    if (!data.includes(this.needle)) return;
    let parsed: unknown;
    try {
      parsed = parseLargest(data, this.names);
    } catch {
      return;
    }
    const value = at(parsed, this.source);
    if (value !== undefined && value !== null) this.found = larger(this.found, value);
  }

  private checked(value: unknown): number | undefined {
    if (value === undefined || value === null) return undefined;
    const n = typeof value === 'string' && /^\d{1,16}$/.test(value.trim()) && this.source.kind === 'header' ? Number(value) : value;
    if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0) return n;
    const where = this.source.kind === 'header' ? `header ${this.source.header}` : `field ${this.source.path.join('.')}`;
    this.warn(
      WarningCode.COST_USAGE_INVALID,
      `rule ${JSON.stringify(this.rule)}: the upstream reported a cost that is not a whole number ≥ 0 in its ${where} (${describeUsage(value)}), so the request was charged the estimate. Have the upstream send the units as a whole number.`,
    );
    return undefined;
  }

  private tooLarge(what: string): void {
    const outcome =
      this.mode === 'json'
        ? 'the body was relayed whole and the request charged cost.missing'
        : 'that part was relayed but not read, so a usage in it is missed (cost.missing is charged unless another event reports one)';
    this.warn(
      WarningCode.COST_RESPONSE_TOO_LARGE,
      `rule ${JSON.stringify(this.rule)} reads its cost from the response body, but ${what}; ${outcome}. Have the upstream report the cost in a header (cost: { header: … }) for such responses.`,
    );
  }
}

/** The value at the source's path, or undefined when some step is missing. */
function at(value: unknown, source: UsageSource): unknown {
  if (source.kind !== 'json') return undefined;
  let here = value;
  for (const segment of source.path) {
    // Own properties only: a path such as "constructor" must not reach into the prototype.
    if (here === null || typeof here !== 'object' || !Object.hasOwn(here, segment)) return undefined;
    here = (here as Record<string, unknown>)[segment];
  }
  return here;
}

/** A reported value for a message, cut short: it comes from the upstream. */
function describeUsage(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : Array.isArray(value) ? 'a list' : String(value);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
