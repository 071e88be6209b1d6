// key: path, path:N and path:{name} from the attacker's side: a real gateway on a socket and a real upstream, one row per spelling.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import type { Gateway } from '../../../src/gateway/serve/gateway.js';
import { rejectsConfig } from '../support/config-errors.js';
import { gatewayFixture } from '../support/harness.js';
import { attackTable, type AttackRow } from '../support/key-attacks.js';

const CONFIG = `rules:
  - name: by-path
    match: { path: /p/ }
    key: path
    policies: ["1/1m"]
  - name: by-segment
    match: { path: /s/ }
    key: path:2
    policies: ["1/1m"]
  - name: by-group
    match: { pathPattern: "^/g/(?<user>[^/]+)?" }
    key: path:{user}
    policies: ["1/1m"]
`;

const t = (target: string): { target: string } => ({ target });
const long = 'seg'.repeat(3000);

/** Each row's paths are its own, so every row starts from a fresh count (limit 1: a second request under one key is 429). */
const ROWS: AttackRow[] = [
  // key: path (the whole canonical path, without its query)
  { attempt: 'path: one path, twice', requests: [t('/p/a1'), t('/p/a1')], expect: [200, 429] },
  { attempt: 'path: two paths count apart', requests: [t('/p/a2'), t('/p/b2')], expect: [200, 200] },
  { attempt: 'path: a trailing slash is the same path', requests: [t('/p/a3/'), t('/p/a3')], expect: [200, 429] },
  { attempt: 'path: // is merged', requests: [t('/p//a4'), t('/p/a4')], expect: [200, 429] },
  { attempt: 'path: x/.. is resolved', requests: [t('/p/x/../a5'), t('/p/a5')], expect: [200, 429] },
  { attempt: 'path: /./ is resolved', requests: [t('/p/./a6'), t('/p/a6')], expect: [200, 429] },
  { attempt: 'path: an escaped unreserved character (%61) is the character', requests: [t('/p/%61%37'), t('/p/a7')], expect: [200, 429] },
  { attempt: 'path: another case is the same path (paths match in any case)', requests: [t('/p/A8'), t('/P/a8')], expect: [200, 429] },
  { attempt: 'path: the query is not part of it', requests: [t('/p/a9?x=1'), t('/p/a9?x=2')], expect: [200, 429] },
  { attempt: 'path: an escaped slash (%2F) is refused before counting', requests: [t('/p/a%2Fb10')], expect: [400] },
  { attempt: 'path: climbing above the root is refused', requests: [t('/p/../../a11')], expect: [400] },
  { attempt: 'path: a backslash is refused', requests: [t('/p/a\\b12')], expect: [400] },
  {
    attempt: 'path: a 9 000-byte path is counted (hashed), and again',
    requests: [t(`/p/${long}13`), t(`/p/${long}13`)],
    expect: [200, 429],
  },
  {
    attempt: 'path: two 9 000-byte paths that differ only at the end count apart',
    requests: [t(`/p/${long}14a`), t(`/p/${long}14b`)],
    expect: [200, 200],
  },
  // key: path:2 (the second segment)
  { attempt: 'path:2: the same segment under different rests is one key', requests: [t('/s/u20/a'), t('/s/u20/b')], expect: [200, 429] },
  { attempt: 'path:2: a trailing slash is the same segment', requests: [t('/s/u21/'), t('/s/u21')], expect: [200, 429] },
  { attempt: 'path:2: // does not shift the segments', requests: [t('/s//u22'), t('/s/u22')], expect: [200, 429] },
  { attempt: 'path:2: .. is resolved before the segment is read', requests: [t('/s/x/../u23'), t('/s/u23')], expect: [200, 429] },
  { attempt: 'path:2: without a second segment (/s/) is 400', requests: [t('/s/')], expect: [400] },
  { attempt: 'path:2: an escaped slash inside the segment is refused', requests: [t('/s/u24%2Fx')], expect: [400] },
  { attempt: 'path:2: another case is the same segment', requests: [t('/s/U25'), t('/s/u25')], expect: [200, 429] },
  // key: path:{user} (a named group of the rule's pathPattern)
  { attempt: 'path:{user}: the group under different rests is one key', requests: [t('/g/u30/a'), t('/g/u30/b')], expect: [200, 429] },
  {
    attempt: 'path:{user}: .. and // are settled before the group is read',
    requests: [t('/g//x/../u31'), t('/g/u31')],
    expect: [200, 429],
  },
  { attempt: 'path:{user}: an empty group (/g/) is 400', requests: [t('/g/')], expect: [400] },
  { attempt: 'path:{user}: another case is the same key', requests: [t('/g/U32'), t('/g/u32')], expect: [200, 429] },
];

describe('path keys', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    g = await fixture.start(`upstream: ${fixture.upstream.url}\n${CONFIG}`);
  });

  describe('attack table', () => attackTable(ROWS, () => g));
});

describe('path keys with paths.caseSensitive', () => {
  const fixture = gatewayFixture();
  let g: Gateway;
  before(async () => {
    await fixture.ready();
    g = await fixture.start(`upstream: ${fixture.upstream.url}\npaths: { caseSensitive: true }\n${CONFIG}`);
  });

  attackTable([{ attempt: 'path:2: another case is another key', requests: [t('/s/U40'), t('/s/u40')], expect: [200, 200] }], () => g);
});

describe('config: path keys', () => {
  it('parses path, path:N and path:{name}', async () => {
    const s = await parseConfigText(`${CONFIG}`, 'gw.yaml');
    assert.deepEqual(
      s.rules.map((r) => r.key),
      [{ kind: 'path' }, { kind: 'path', segment: 2 }, { kind: 'path', group: 'user' }],
    );
  });

  it('refuses a group the pattern lacks, a rule without a pattern, and segment 0, with the file, line and field', async () => {
    await rejectsConfig(
      'rules:\n  - name: a\n    match: { pathPattern: "^/u/(?<id>[0-9]+)" }\n    key: path:{user}\n    policies: ["1/1m"]\n',
      /^gw\.yaml:4:10: rules\[0\]\.key: path:\{user\}: the rule's pathPattern "\^\/u\/\(\?<id>\[0-9\]\+\)" has no group named user/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    key: path:{user}\n    policies: ["1/1m"]\n',
      /rules\[0\]\.key: path:\{user\} names a group of the rule's pathPattern, but the rule has none/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    match: { path: /x/ }\n    policies: [{ limit: 1, window: 1m, key: "path:{user}" }]\n',
      /rules\[0\]\.policies\[0\]\.key: path:\{user\} names a group/,
    );
    await rejectsConfig(
      'rules:\n  - name: a\n    key: path:0\n    policies: ["1/1m"]\n',
      /rules\[0\]\.key: is "path" \(the whole path\), "path:N"/,
    );
  });
});
