// Client identity: IP parsing and normalising, CIDR matching, trusted proxies (hops and CIDRs, v4 and v6), spoofing, IPv6 /64 grouping and hashing of long keys.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorCode } from '../../src/core/errors.js';
import { boundKey, createIpResolver, headerValue, ipKey, parseForwardedFor } from '../../src/http/client-keys.js';
import { AddressMatcher, formatIp, normalizeIp, parseCidr, parseIp, type IpAddress } from '../../src/http/ip-address.js';

const ip = (text: string): IpAddress => {
  const parsed = parseIp(text);
  assert.ok(parsed, `${text} parses`);
  return parsed;
};
const resolved = (
  r: ReturnType<typeof createIpResolver>,
  socket: string | undefined,
  headers: Record<string, string | string[]> = {},
): string | undefined => {
  const result = r(socket, headers);
  return result === undefined ? undefined : formatIp(result);
};

describe('parseIp / formatIp / normalizeIp', () => {
  it('accepts the forms sockets and proxies write', () => {
    assert.equal(normalizeIp('192.0.2.1'), '192.0.2.1');
    assert.equal(normalizeIp(' 192.0.2.1:8080 '), '192.0.2.1');
    assert.equal(normalizeIp('[2001:db8::1]:443'), '2001:db8::1');
    assert.equal(normalizeIp('[2001:db8::1]'), '2001:db8::1');
    assert.equal(normalizeIp('fe80::1%eth0'), 'fe80::1');
  });

  it('rejects what is not an address', () => {
    for (const bad of [
      'unknown',
      '_hidden',
      '',
      '01.2.3.4',
      '1.2.3',
      '256.1.1.1',
      '[::1',
      '[::1]x',
      '2001:db8::1:80:',
      'a.b.c.d',
      '1.2.3.4:99999999',
    ]) {
      assert.equal(parseIp(bad), undefined, bad);
    }
  });

  it('normalises IPv4-mapped IPv6 to IPv4, in either notation', () => {
    assert.deepEqual(ip('::ffff:1.2.3.4'), { version: 4, bytes: Uint8Array.from([1, 2, 3, 4]) });
    assert.equal(normalizeIp('::FFFF:1.2.3.4'), '1.2.3.4');
    assert.equal(normalizeIp('::ffff:0102:0304'), '1.2.3.4');
    assert.equal(normalizeIp('[::ffff:127.0.0.1]:80'), '127.0.0.1');
    // Not mapped: IPv4-compatible and NAT64 addresses stay IPv6.
    assert.equal(normalizeIp('::1.2.3.4'), '::102:304');
    assert.equal(normalizeIp('64:ff9b::1.2.3.4'), '64:ff9b::102:304');
  });

  it('writes IPv6 as RFC 5952 says', () => {
    assert.equal(normalizeIp('2001:0DB8:0000:0000:0000:0000:0000:0001'), '2001:db8::1');
    assert.equal(normalizeIp('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1', 'a single zero group is not compressed');
    assert.equal(normalizeIp('2001:0:0:1:0:0:0:1'), '2001:0:0:1::1', 'the longest run is compressed');
    assert.equal(normalizeIp('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1', 'the first of equal runs is compressed');
    assert.equal(normalizeIp('::'), '::');
    assert.equal(normalizeIp('0:0:0:0:0:0:0:1'), '::1');
    assert.equal(normalizeIp('fe80:0:0:0:0:0:0:0'), 'fe80::');
  });
});

describe('CIDR matching', () => {
  it('matches IPv4 and IPv6 ranges', () => {
    const v4 = parseCidr('10.0.0.0/8')!;
    const v6 = parseCidr('2001:db8::/32')!;
    const odd = parseCidr('192.168.1.128/25')!;
    assert.ok(new AddressMatcher(['10.0.0.0/8'], 't').matches(ip('10.255.1.1')));
    assert.deepEqual([v4.bits, v6.bits, odd.bits], [8, 32, 25]);
    const m = new AddressMatcher(['10.0.0.0/8', '2001:db8::/32', '192.168.1.128/25', '198.51.100.7'], 'test');
    for (const yes of [
      '10.0.0.1',
      '10.255.255.255',
      '2001:db8::1',
      '2001:db8:ffff:ffff::1',
      '192.168.1.200',
      '198.51.100.7',
      '::ffff:10.1.1.1',
    ]) {
      assert.ok(m.matches(ip(yes)), `${yes} in range`);
    }
    for (const no of ['11.0.0.1', '2001:db9::1', '192.168.1.127', '198.51.100.8', '::a00:1']) {
      assert.ok(!m.matches(ip(no)), `${no} not in range`);
    }
  });

  it('reads an IPv4-mapped range as the IPv4 range, and refuses malformed ones', () => {
    assert.deepEqual(parseCidr('::ffff:10.0.0.0/104'), { version: 4, bytes: Uint8Array.from([10, 0, 0, 0]), bits: 8 });
    for (const bad of ['10.0.0.0/33', '2001:db8::/129', '::ffff:0:0/95', '10.0.0.0/', '10.0.0.0/x', 'fe80::1%eth0/64', 'nonsense']) {
      assert.equal(parseCidr(bad), undefined, bad);
    }
  });

  it('knows the named ranges and rejects bad entries with a stable code', () => {
    const m = new AddressMatcher(['loopback', 'private', 'linklocal'], 'test');
    for (const yes of ['127.0.0.1', '::1', '10.1.1.1', '172.31.0.1', '192.168.0.1', 'fd00::1', '169.254.1.1', 'fe80::1'])
      assert.ok(m.matches(ip(yes)), yes);
    for (const no of ['8.8.8.8', '172.32.0.1', '2001:db8::1']) assert.ok(!m.matches(ip(no)), no);
    assert.throws(() => new AddressMatcher(['10.0.0.0/40'], 'trustProxy'), { code: ErrorCode.INVALID_OPTIONS });
  });
});

describe('Forwarded (RFC 7239)', () => {
  it('extracts the for= value of each element', () => {
    assert.deepEqual(parseForwardedFor('for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"'), [
      '192.0.2.60',
      '[2001:db8:cafe::17]:4711',
    ]);
    assert.deepEqual(parseForwardedFor('proto=https, For="_gazonk"'), [undefined, '_gazonk']);
    assert.deepEqual(parseForwardedFor('for="a,b;c", for=unknown'), ['a,b;c', 'unknown']);
    assert.deepEqual(parseForwardedFor(''), []);
  });
});

describe('createIpResolver: trusted proxies and spoofing', () => {
  it('ignores proxy headers by default, so a direct client cannot choose its key', () => {
    const r = createIpResolver();
    assert.equal(resolved(r, '203.0.113.9', { 'x-forwarded-for': '1.1.1.1' }), '203.0.113.9');
    assert.equal(resolved(r, '203.0.113.9', { forwarded: 'for=1.1.1.1' }), '203.0.113.9');
    assert.equal(resolved(r, '::ffff:203.0.113.9'), '203.0.113.9');
    assert.equal(resolved(r, undefined), undefined);
  });

  it('with a hop count, takes the address the outermost trusted proxy saw', () => {
    const one = createIpResolver({ trustProxy: 1 });
    assert.equal(resolved(one, '10.0.0.1', { 'x-forwarded-for': 'spoofed, 203.0.113.7' }), '203.0.113.7');
    assert.equal(
      resolved(one, '10.0.0.1', { 'x-forwarded-for': ['1.1.1.1', '203.0.113.7'] }),
      '203.0.113.7',
      'repeated fields are one list',
    );
    assert.equal(resolved(one, '10.0.0.1'), '10.0.0.1', 'no header: the socket peer');
    const two = createIpResolver({ trustProxy: 2 });
    assert.equal(resolved(two, '10.0.0.1', { 'x-forwarded-for': '6.6.6.6, 198.51.100.1, 10.0.0.2' }), '198.51.100.1');
    assert.equal(resolved(two, '10.0.0.1', { 'x-forwarded-for': '198.51.100.1' }), '198.51.100.1', 'fewer entries: the left-most');
    assert.equal(
      resolved(two, '10.0.0.1', { 'x-forwarded-for': 'unknown, 10.0.0.2' }),
      '10.0.0.2',
      'an unparseable pick falls back to its right',
    );
    const fwd = createIpResolver({ trustProxy: 1, proxyHeader: 'forwarded' });
    assert.equal(
      resolved(fwd, '10.0.0.1', { forwarded: 'for=6.6.6.6, for="[2001:db8::5]:1234"', 'x-forwarded-for': '9.9.9.9' }),
      '2001:db8::5',
    );
  });

  it('with trusted CIDRs, walks back to the first untrusted address (IPv4 and IPv6)', () => {
    const r = createIpResolver({ trustProxy: ['10.0.0.0/8', '2001:db8:ffff::/48'] });
    assert.equal(resolved(r, '203.0.113.9', { 'x-forwarded-for': '1.1.1.1' }), '203.0.113.9', 'untrusted peer: header ignored');
    assert.equal(resolved(r, '10.0.0.1', { 'x-forwarded-for': '1.1.1.1, 198.51.100.7, 10.0.0.5' }), '198.51.100.7');
    assert.equal(resolved(r, '::ffff:10.0.0.1', { 'x-forwarded-for': '198.51.100.7' }), '198.51.100.7', 'mapped peer counts as IPv4');
    assert.equal(resolved(r, '10.0.0.1', { 'x-forwarded-for': '10.0.0.9' }), '10.0.0.9', 'all trusted: the left-most');
    assert.equal(resolved(r, '10.0.0.1', { 'x-forwarded-for': 'junk, 10.0.0.5' }), '10.0.0.5', 'stops at an unparseable entry');
    assert.equal(resolved(r, '2001:db8:ffff::1', { 'x-forwarded-for': '2001:db8:ffff::2, 2600:1f18::9' }), '2600:1f18::9');
    assert.equal(resolved(r, '2001:db8:ffff::1', { 'x-forwarded-for': '2600:1f18::9, 2001:db8:ffff::2' }), '2600:1f18::9');
    assert.equal(resolved(r, '2001:db9::1', { 'x-forwarded-for': '2600:1f18::9' }), '2001:db9::1', 'untrusted IPv6 peer');
  });

  it('refuses settings that would trust anyone or are malformed', () => {
    for (const trustProxy of [true, 0, 33, 1.5, '10.0.0.0/8', ['nonsense']]) {
      assert.throws(() => createIpResolver({ trustProxy: trustProxy as never }), { code: ErrorCode.INVALID_OPTIONS }, String(trustProxy));
    }
    assert.throws(() => createIpResolver({ trustProxy: 1, proxyHeader: 'x-real-ip' as never }), { code: ErrorCode.INVALID_OPTIONS });
  });
});

describe('ipKey: IPv6 grouping', () => {
  it('groups IPv6 clients by /64 by default', () => {
    assert.equal(ipKey(ip('2001:db8:1:2:3:4:5:6')), '2001:db8:1:2::/64');
    assert.equal(ipKey(ip('2001:db8:1:2:ffff::1')), ipKey(ip('2001:db8:1:2::9')), 'same /64, same key');
    assert.notEqual(ipKey(ip('2001:db8:1:3::1')), ipKey(ip('2001:db8:1:2::1')));
    assert.equal(ipKey(ip('::1')), '::/64');
  });

  it('takes other prefixes, whole addresses with false, and leaves IPv4 alone', () => {
    assert.equal(ipKey(ip('2001:db8:1:2ff::1'), 56), '2001:db8:1:200::/56');
    assert.equal(ipKey(ip('2001:db8::1'), false), '2001:db8::1');
    assert.equal(ipKey(ip('2001:db8::1'), 128), '2001:db8::1');
    assert.equal(ipKey(ip('192.0.2.1')), '192.0.2.1');
    assert.equal(ipKey(ip('::ffff:192.0.2.1')), '192.0.2.1');
  });
});

describe('API keys and key length', () => {
  it('reads a header, trimmed, with repeats joined', () => {
    assert.equal(headerValue({ 'x-api-key': '  abc ' }, 'X-Api-Key'), 'abc');
    assert.equal(headerValue({ 'x-api-key': ['a', 'b'] }, 'x-api-key'), 'a, b');
    assert.equal(headerValue({ 'x-api-key': '   ' }, 'x-api-key'), undefined);
    assert.equal(headerValue({}, 'x-api-key'), undefined);
  });

  it('hashes keys over the byte limit, deterministically', () => {
    assert.equal(boundKey('short', 128), 'short');
    const exactly = 'x'.repeat(128);
    assert.equal(boundKey(exactly, 128), exactly);
    const long = 'x'.repeat(129);
    const hashed = boundKey(long, 128);
    assert.match(hashed, /^sha256:[A-Za-z0-9_-]{43}$/);
    assert.equal(boundKey(long, 128), hashed);
    assert.notEqual(boundKey(`${long}y`, 128), hashed);
    // 50 characters, 150 bytes: the limit is in bytes.
    assert.match(boundKey('€'.repeat(50), 128), /^sha256:/);
    assert.match(boundKey('k'.repeat(1_000_000), 128), /^sha256:/);
  });
});
