import { describe, expect, it } from 'vitest';
import { type AddressClass, classifyAddress, parseIPv6 } from '../../../src/storage/http/address.js';
import { refusedClass } from '../../../src/storage/http/guard.js';

/** Address → class, grouped so a failure names the row. */
const TABLE: Array<[string, AddressClass]> = [
  ['8.8.8.8', 'public'],
  ['1.1.1.1', 'public'],
  ['2606:4700:4700::1111', 'public'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['::1', 'loopback'],
  ['[::1]', 'loopback'],
  ['10.0.0.5', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['172.32.0.1', 'public'],
  ['192.168.1.1', 'private'],
  ['fc00::1', 'private'],
  ['fd12:3456::1', 'private'],
  ['169.254.1.1', 'link-local'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['febf::1', 'link-local'],
  ['100.64.0.1', 'cgnat'],
  ['100.127.255.255', 'cgnat'],
  ['100.128.0.1', 'public'],
  ['0.0.0.0', 'unspecified'],
  ['::', 'unspecified'],
  ['0.1.2.3', 'reserved'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['ff02::1', 'multicast'],
  ['255.255.255.255', 'broadcast'],
  ['240.0.0.1', 'reserved'],
  ['169.254.169.254', 'metadata'],
  ['169.254.170.2', 'metadata'],
  ['100.100.100.200', 'metadata'],
  ['fd00:ec2::254', 'metadata'],
  ['192.0.2.10', 'documentation'],
  ['198.51.100.1', 'documentation'],
  ['203.0.113.7', 'documentation'],
  ['2001:db8::1', 'documentation'],
  ['198.18.0.1', 'benchmark'],
  ['198.19.255.255', 'benchmark'],
  // IPv4 carried in IPv6: judged by the IPv4 address.
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:169.254.169.254', 'metadata'],
  ['::ffff:10.0.0.5', 'private'],
  ['::ffff:8.8.8.8', 'public'],
  ['::ffff:0:10.1.2.3', 'private'],
  ['64:ff9b::a9fe:a9fe', 'metadata'],
  ['64:ff9b::8.8.8.8', 'public'],
  ['64:ff9b:1::1', 'private'],
  ['2002:a9fe:a9fe::1', 'metadata'],
  ['2002:0808:0808::1', 'public'],
  ['::127.0.0.1', 'loopback'],
  ['::8.8.8.8', 'reserved'],
  ['2001::1', 'reserved'],
  ['100::1', 'reserved'],
  ['4000::1', 'reserved'],
  // Not an address at all: refused, never let through.
  ['localhost', 'reserved'],
  ['', 'reserved'],
  ['1.2.3', 'reserved'],
];

describe('classifyAddress', () => {
  for (const [address, cls] of TABLE) {
    it(`${address || '(empty)'} is ${cls}`, () => {
      expect(classifyAddress(address)).toBe(cls);
    });
  }

  it('parses every IPv6 spelling to the same eight groups', () => {
    const expected = [0, 0, 0, 0, 0, 0xffff, 0x7f00, 1];
    for (const text of [
      '::ffff:127.0.0.1',
      '0:0:0:0:0:ffff:7f00:1',
      '::FFFF:7F00:0001',
      '[::ffff:127.0.0.1]',
    ]) {
      expect(parseIPv6(text), text).toEqual(expected);
    }
    expect(parseIPv6('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIPv6('1:2:3:4:5:6:7:8')).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(parseIPv6('1:2:3')).toBeUndefined();
  });
});

describe('refusedClass (the policy)', () => {
  it('refuses everything but public addresses by default', () => {
    expect(refusedClass('8.8.8.8', false)).toBeUndefined();
    for (const [address, cls] of TABLE) {
      if (cls !== 'public') expect(refusedClass(address, false), address).toBe(cls);
    }
  });

  it('allowPrivate lifts loopback and private only; link-local, metadata and the rest stay refused', () => {
    for (const [address, cls] of TABLE) {
      const lifted = cls === 'public' || cls === 'loopback' || cls === 'private';
      expect(refusedClass(address, true), address).toBe(lifted ? undefined : cls);
    }
  });
});
