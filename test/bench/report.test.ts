/** The bench table's open-loop columns: titled by share (`@80%`) or by rate (`@16000/s`), each variant's run in its own column. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatTable, type Row } from '../../bench/lib/report.js';

function row(variant: string, openLoop: Row['openLoop']): Row {
  return {
    scenario: 'forwarding',
    variant,
    rps: 20000,
    p50Ms: 1,
    p99Ms: 2,
    redisCmdsPerReq: null,
    ratio: 1,
    serverCpuUsPerReq: 50,
    requests: 200000,
    p90Ms: 1.5,
    maxMs: 9,
    status: { '2xx': 200000, '429': 0, other: 0 },
    socketErrors: { connect: 0, read: 0, write: 0, timeout: 0 },
    redisCommands: null,
    durationS: 10,
    connections: 64,
    ...(openLoop === undefined ? {} : { openLoop }),
  };
}

const INFO = { scenario: 'forwarding', description: 'd', lines: [] };
const run = (p99Ms: number) => ({ targetRps: 16000, achievedRps: 16000, p50Ms: 0.5, p99Ms, errors: 0 });

/** The table's header line split into column titles (two or more spaces apart). */
function titles(table: string): string[] {
  return table.split('\n')[2]!.trim().split(/ {2,}/);
}

describe('bench report', () => {
  it('runs at absolute rates get columns titled by the rate, ascending, one value per variant', () => {
    const table = formatTable(INFO, [
      row('floodgate-memory', [
        { rate: 16000, ...run(4.25) },
        { rate: 8000, ...run(1) },
      ]),
      row('node-http', [
        { rate: 8000, ...run(0.5) },
        { rate: 16000, ...run(1.75) },
      ]),
    ]);
    const header = titles(table);
    assert.ok(header.indexOf('p99 ms @8000/s') < header.indexOf('p99 ms @16000/s'));
    const column = header.indexOf('p99 ms @16000/s');
    const cells = (variant: string) =>
      table
        .split('\n')
        .find((line) => line.startsWith(variant))!
        .trim()
        .split(/ +/);
    assert.equal(cells('floodgate-memory')[column], '4.25');
    assert.equal(cells('node-http')[column], '1.75');
    assert.match(table, /the same for every variant \(--open-loop\)/);
    assert.doesNotMatch(table, /@80%/);
  });

  it('runs at shares keep their @N% columns', () => {
    const table = formatTable(INFO, [row('floodgate-memory', [{ share: 0.8, ...run(3) }])]);
    assert.ok(titles(table).includes('p99 ms @80%'));
    assert.doesNotMatch(table, /--open-loop/);
  });
});
