/** FairQueue: waiters in priority classes, served highest class first and round-robin across tenants within a class. */
/**
 * Why round robin and not one FIFO line: in one line a tenant that sends ten times the others holds ten times the places, and
 * everyone's wait grows with its backlog. With one line per tenant served in turn (deficit round robin with a quantum of one
 * request, as every request here costs one slot), a tenant that asks for little is served within one round however long the
 * noisy tenant's line is: the admitted capacity is shared max-min fairly between the tenants that are waiting.
 *
 * Every list is intrusive and doubly linked, so a waiter that times out or is abandoned leaves in O(1): a lazy "skip the
 * dead ones when popped" would let the lines of a tenant whose waiters time out faster than they are served grow without bound.
 * The longest line of a class is kept by count too (lines grouped by length, as an LFU cache keeps its counts), so finding
 * whom a full queue evicts is O(1): a scan of the lines would let a flood of requests under ever new tenant values, each a
 * line of one, cost each refused newcomer a walk over the whole queue (0.24 ms at 100 000 lines, on the request path).
 */

/** A waiter's place in a {@link FairQueue}; pass it to {@link FairQueue.remove} to take it out. */
export interface FairEntry<T> {
  /** What the caller queued. */
  readonly item: T;
  /** The class index it waits in (0 is the highest). */
  readonly priority: number;
  /** Its tenant's key. */
  readonly tenant: string;
  /** @internal */ line: TenantLine<T> | undefined;
  /** @internal */ prev: FairEntry<T> | undefined;
  /** @internal */ next: FairEntry<T> | undefined;
}

/** One tenant's waiters in one class, oldest first; in its class's ring while it has any. */
interface TenantLine<T> {
  readonly tenant: string;
  head: FairEntry<T> | undefined;
  tail: FairEntry<T> | undefined;
  count: number;
  prev: TenantLine<T> | undefined;
  next: TenantLine<T> | undefined;
}

/** One class: its tenants' lines by key, the ring that serves them in turn, and its lines by length. */
interface ClassQueue<T> {
  readonly lines: Map<string, TenantLine<T>>;
  ringHead: TenantLine<T> | undefined;
  ringTail: TenantLine<T> | undefined;
  count: number;
  /** The lines of each length (1 and up); a length no line has is absent. */
  readonly byLength: Map<number, Set<TenantLine<T>>>;
  /** The longest line's length; 0 when the class is empty. */
  longest: number;
}

/**
 * Waiters in `classes` priority classes (index 0 served first). Within a class, each tenant has its own FIFO line and the
 * lines are served one waiter at a time in turn. Holds no timers and no bound: the caller decides when a waiter is admitted,
 * times out or is evicted (see {@link victimFor}).
 */
export class FairQueue<T> {
  private readonly classes: ClassQueue<T>[];
  private total = 0;

  /** @param classes - how many priority classes (at least 1) */
  constructor(classes: number) {
    this.classes = Array.from({ length: classes }, () => ({
      lines: new Map(),
      ringHead: undefined,
      ringTail: undefined,
      count: 0,
      byLength: new Map(),
      longest: 0,
    }));
  }

  /** Waiters in every class. */
  get size(): number {
    return this.total;
  }

  /** Waiters in class `priority`. */
  sizeOf(priority: number): number {
    return this.classes[priority]!.count;
  }

  /** True when some waiter's class is `priority` or higher (a lower index): a newcomer of `priority` must queue behind it. */
  waitingAtOrAbove(priority: number): boolean {
    for (let p = 0; p <= priority; p++) if (this.classes[p]!.count > 0) return true;
    return false;
  }

  /** Queues `item` at the end of its tenant's line in class `priority`. */
  push(priority: number, tenant: string, item: T): FairEntry<T> {
    const cls = this.classes[priority]!;
    let line = cls.lines.get(tenant);
    if (line === undefined) {
      line = { tenant, head: undefined, tail: undefined, count: 0, prev: cls.ringTail, next: undefined };
      cls.lines.set(tenant, line);
      if (cls.ringTail === undefined) cls.ringHead = line;
      else cls.ringTail.next = line;
      cls.ringTail = line;
    }
    const entry: FairEntry<T> = { item, priority, tenant, line, prev: line.tail, next: undefined };
    if (line.tail === undefined) line.head = entry;
    else line.tail.next = entry;
    line.tail = entry;
    line.count++;
    relength(cls, line, line.count - 1);
    cls.count++;
    this.total++;
    return entry;
  }

  /** True while `entry` waits in this queue (not yet shifted, taken or removed). */
  has(entry: FairEntry<T>): boolean {
    return entry.line !== undefined;
  }

  /** The waiter {@link shift} would take next, left in place; undefined when none waits. */
  peek(): FairEntry<T> | undefined {
    for (const cls of this.classes) if (cls.ringHead !== undefined) return cls.ringHead.head;
    return undefined;
  }

  /** Takes the next waiter: the highest class that has one, the tenant whose turn it is; undefined when none waits. */
  shift(): FairEntry<T> | undefined {
    const entry = this.next();
    if (entry !== undefined) this.take(entry);
    return entry;
  }

  /**
   * The waiter {@link shift} would take, left in place: the highest class that has one, the first tenant in turn. With
   * `eligible`, tenants it refuses are passed over (they keep their turn); the walk is as long as the lines passed over.
   */
  next(eligible?: (tenant: string) => boolean): FairEntry<T> | undefined {
    for (const cls of this.classes) {
      for (let line = cls.ringHead; line !== undefined; line = line.next)
        if (eligible === undefined || eligible(line.tenant)) return line.head;
    }
    return undefined;
  }

  /** Takes `entry` (from {@link next}) out, and sends its tenant to the back of its class's ring when it still waits. */
  take(entry: FairEntry<T>): void {
    const line = entry.line;
    if (line === undefined || !this.remove(entry)) return;
    // remove dropped the line from the ring when it emptied.
    const cls = this.classes[entry.priority]!;
    if (line.count > 0 && cls.ringTail !== line) {
      unlinkLine(cls, line);
      appendLine(cls, line);
    }
  }

  /** Takes `entry` out wherever it is; false when it was not queued (already shifted or removed). */
  remove(entry: FairEntry<T>): boolean {
    const line = entry.line;
    if (line === undefined) return false;
    const cls = this.classes[entry.priority]!;
    if (entry.prev === undefined) line.head = entry.next;
    else entry.prev.next = entry.next;
    if (entry.next === undefined) line.tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.line = entry.prev = entry.next = undefined;
    line.count--;
    relength(cls, line, line.count + 1);
    cls.count--;
    this.total--;
    if (line.count === 0) {
      unlinkLine(cls, line);
      cls.lines.delete(line.tenant);
    }
    return true;
  }

  /**
   * The waiter to evict so that a newcomer of class `priority` and tenant `tenant` can take its place in a full queue, or
   * undefined when the newcomer is the one to refuse. The newest waiter of the lowest class below `priority` goes first, from
   * its longest line; within the newcomer's own class, the newest of the longest line, when that line is longer than the
   * newcomer's would be: a noisy tenant cannot hold the queue against a quiet one, and a newcomer never evicts its equal.
   */
  victimFor(priority: number, tenant: string): FairEntry<T> | undefined {
    for (let p = this.classes.length - 1; p > priority; p--) {
      const longest = longestLine(this.classes[p]!);
      if (longest !== undefined) return longest.tail;
    }
    const cls = this.classes[priority]!;
    const longest = longestLine(cls);
    if (longest === undefined) return undefined;
    const own = cls.lines.get(tenant)?.count ?? 0;
    return longest.count > own + 1 ? longest.tail : undefined;
  }
}

/** A longest line of the class (the one that reached that length first), in O(1); undefined when the class is empty. */
function longestLine<T>(cls: ClassQueue<T>): TenantLine<T> | undefined {
  if (cls.longest === 0) return undefined;
  return cls.byLength.get(cls.longest)!.values().next().value;
}

/** Moves `line` from the group of length `was` to that of its length now (each step is ±1, so the longest moves by at most 1). */
function relength<T>(cls: ClassQueue<T>, line: TenantLine<T>, was: number): void {
  if (was > 0) {
    const group = cls.byLength.get(was)!;
    group.delete(line);
    if (group.size === 0) {
      cls.byLength.delete(was);
      if (cls.longest === was && line.count < was) cls.longest = line.count;
    }
  }
  if (line.count > 0) {
    let group = cls.byLength.get(line.count);
    if (group === undefined) cls.byLength.set(line.count, (group = new Set()));
    group.add(line);
    if (line.count > cls.longest) cls.longest = line.count;
  }
}

function unlinkLine<T>(cls: ClassQueue<T>, line: TenantLine<T>): void {
  if (line.prev === undefined) cls.ringHead = line.next;
  else line.prev.next = line.next;
  if (line.next === undefined) cls.ringTail = line.prev;
  else line.next.prev = line.prev;
  line.prev = line.next = undefined;
}

function appendLine<T>(cls: ClassQueue<T>, line: TenantLine<T>): void {
  line.prev = cls.ringTail;
  line.next = undefined;
  if (cls.ringTail === undefined) cls.ringHead = line;
  else cls.ringTail.next = line;
  cls.ringTail = line;
}
