/** CPU time of a process and all its descendants, read from /proc: the server-side cost of a run, steadier than requests/s on a shared machine. */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times; 100 on every Linux this runs on (USER_HZ). */
const TICKS_PER_S = 100;

/**
 * User + system CPU ms used so far by `root` and every live descendant (a
 * cluster's workers, a gateway's upstream child), or null where /proc is
 * missing. Descendants that already exited are not counted: sample while
 * the tree runs.
 */
export function treeCpuMs(root: number): number | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const children = new Map<number, number[]>();
  const ticks = new Map<number, number>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat === undefined) continue;
    ticks.set(stat.pid, stat.ticks);
    const siblings = children.get(stat.ppid);
    if (siblings === undefined) children.set(stat.ppid, [stat.pid]);
    else siblings.push(stat.pid);
  }
  if (!ticks.has(root)) return null;
  let total = 0;
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.pop()!;
    total += ticks.get(pid) ?? 0;
    queue.push(...(children.get(pid) ?? []));
  }
  return (total * 1000) / TICKS_PER_S;
}

function readStat(pid: number): { pid: number; ppid: number; ticks: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // exited meanwhile
  }
  // The command name (field 2) may hold spaces and parentheses; the fields after its last ")" are plain.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // After the name: state(3) ppid(4) … utime(14) stime(15), so index = field number − 3.
  return { pid, ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
}
