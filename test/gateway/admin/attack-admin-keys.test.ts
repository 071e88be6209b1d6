// The admin attack suite on key names: keys named like policy kinds and addresses (global, ip, another client's IP, p), dot segments, an encoded dot, an empty key, a very long one and one with "/", each blocked and reset through the rule-level and the policy-named paths of a real gateway, with clients on their own loopback addresses. Prints the table; no action may touch another client.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeSegment } from '../../../src/gateway/admin/admin-http.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { adminBlock, adminJson } from '../support/admin.js';
import { statusFrom } from '../support/from-address.js';
import { gatewayFixture } from '../support/harness.js';

const fixture = gatewayFixture();
const TOKEN = 'attack-admin-keys-token-0123456789ab';

/** `mixed` counts by API key, by address and globally (a KEY could be two clients); `solo` by API key and globally. */
const CONFIG = (upstream: string) =>
  `upstream: ${upstream}\n${adminBlock(TOKEN)}rules:\n` +
  '  - name: mixed\n    match: { path: /m/ }\n    key: { header: x-api-key }\n    policies:\n' +
  '      - { name: per-key, limit: 5, window: 1h }\n      - { name: per-ip, limit: 1000, window: 1h, key: ip }\n' +
  '      - { name: all, limit: 1000, window: 1h, key: global }\n' +
  '  - name: solo\n    match: { path: /s/ }\n    key: { header: x-api-key }\n    policies:\n' +
  '      - { name: per-key, limit: 5, window: 1h }\n      - { name: all, limit: 1000, window: 1h, key: global }\n';

/** The bystanders: an address and API key each; the abuser is 127.0.0.3. */
const CLIENTS = [
  { address: '127.0.0.2', key: 'victim-a' },
  { address: '127.0.0.5', key: 'victim-b' },
] as const;
const ABUSER = '127.0.0.3';

/** Key names an abuser may choose, and whether a client can send one as its API key. */
const KEYS: ReadonlyArray<[label: string, key: string, sendable: boolean]> = [
  ['global', 'global', true],
  ['ip', 'ip', true],
  ["another client's IP", '127.0.0.2', true],
  ["the abuser's own IP", ABUSER, true],
  ['p', 'p', true],
  ['.', '.', true],
  ['..', '..', true],
  ['%2e', '%2e', true],
  ['%2E%2E', '%2E%2E', true],
  ['empty', '', false],
  ['300 characters', 'k'.repeat(300), true],
  ['with /', 'team/../alpha', true],
  ['key:-prefixed', 'key:victim-a', true],
];

type Row = Record<string, string | number>;

/** Every bystander's status on both rules: all must be 200. */
async function bystanders(g: Gateway): Promise<number[]> {
  const out: number[] = [];
  for (const c of CLIENTS) for (const path of ['/m/x', '/s/x']) out.push(await statusFrom(g.url, c.address, { 'x-api-key': c.key }, path));
  return out;
}

/** The abuser's status on both rules with `key` as its API key. */
async function abuser(g: Gateway, key: string): Promise<string> {
  const m = await statusFrom(g.url, ABUSER, { 'x-api-key': key }, '/m/x');
  const s = await statusFrom(g.url, ABUSER, { 'x-api-key': key }, '/s/x');
  return `${m}/${s}`;
}

/** An admin POST; the answer's status and the policies it says it acted on. */
async function act(g: Gateway, path: string, body?: string): Promise<string> {
  const r = await adminJson(g.adminUrl!, TOKEN, 'POST', path, body);
  if (r.status !== 200) return `${r.status}${r.json?.code === undefined ? '' : ` ${r.json.code as string}`}`;
  return `200 ${(r.json.policies as Array<{ policy: string }>).map((p) => p.policy).join('+')}`;
}

describe('attack: admin actions on keys named like policy kinds and addresses', () => {
  it('holds: no block or reset of any key name refuses another client, and each names the policies it acted on', async () => {
    const rows: Row[] = [];
    for (const [label, key, sendable] of KEYS) {
      const g = await fixture.start(CONFIG(fixture.upstream.url));
      const segment = encodeSegment(key);
      const forever = '{"duration":"forever"}';
      const row: Row = { key: label };
      row['block mixed (rule)'] = await act(g, `/admin/rules/mixed/keys/${segment}/block`, forever);
      row['block solo (rule)'] = await act(g, `/admin/rules/solo/keys/${segment}/block`, forever);
      row['block mixed per-key'] = await act(g, `/admin/rules/mixed/policies/per-key/keys/${segment}/block`, forever);
      const afterBlock = await bystanders(g);
      row['abuser after block'] = sendable ? await abuser(g, key) : 'n/a';
      row['reset mixed (rule)'] = await act(g, `/admin/rules/mixed/keys/${segment}/reset`);
      row['reset solo (rule)'] = await act(g, `/admin/rules/solo/keys/${segment}/reset`);
      row['reset mixed per-key'] = await act(g, `/admin/rules/mixed/policies/per-key/keys/${segment}/reset`);
      row['abuser after reset'] = sendable ? await abuser(g, key) : 'n/a';
      const afterReset = await bystanders(g);
      const hit = [...afterBlock, ...afterReset].filter((s) => s !== 200).length;
      row['others refused'] = hit;
      rows.push(row);

      assert.equal(hit, 0, `${label}: another client was refused: ${JSON.stringify(row)}`);
      if (key === '') {
        for (const k of Object.keys(row).filter((k) => k.startsWith('block') || k.startsWith('reset')))
          assert.equal(row[k], '400', `${label} ${k}`);
        continue;
      }
      // A KEY on a rule whose policies count by API key and by address names no one client: 409, nothing done.
      assert.equal(row['block mixed (rule)'], '409 FLOODGATE_ADMIN_POLICY_AMBIGUOUS', label);
      assert.equal(row['reset mixed (rule)'], '409 FLOODGATE_ADMIN_POLICY_AMBIGUOUS', label);
      // On a rule counted by API key and globally, the rule-level path leaves the global policy alone.
      assert.equal(row['block solo (rule)'], '200 per-key', label);
      assert.equal(row['reset solo (rule)'], '200 per-key', label);
      assert.equal(row['block mixed per-key'], '200 per-key', label);
      assert.equal(row['reset mixed per-key'], '200 per-key', label);
      // The abuser is the one refused, under both rules, and the reset lets it back.
      assert.equal(row['abuser after block'], '429/429', label);
      assert.equal(row['abuser after reset'], '200/200', label);
    }
    console.table(rows);
  });
});
