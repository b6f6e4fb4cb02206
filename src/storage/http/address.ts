import { isIP } from 'node:net';

/**
 * What an IP address is, for the source fetcher's address guard (issue 32). Only `public` is
 * fetched by default; see `guard.ts` for which classes `allowPrivate` lets through.
 */
export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'unspecified'
  | 'multicast'
  | 'broadcast'
  | 'metadata'
  | 'documentation'
  | 'benchmark'
  | 'reserved';

/** The class in words, with its article, for refusal messages ("a private address"). */
export const ADDRESS_CLASS_WORDS: Readonly<Record<AddressClass, string>> = {
  public: 'a public address',
  loopback: 'a loopback address',
  private: 'a private address',
  'link-local': 'a link-local address',
  cgnat: 'a carrier-grade NAT (100.64.0.0/10) address',
  unspecified: 'an unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  metadata: 'a cloud metadata address',
  documentation: 'a documentation-only address',
  benchmark: 'a benchmarking-only address',
  reserved: 'a reserved address',
};

/** One IPv4 range: the address as a 32-bit number and the prefix length. */
interface Range4 {
  base: number;
  bits: number;
  cls: AddressClass;
}

function range4(cidr: string, cls: AddressClass): Range4 {
  const [ip = '', bits = '32'] = cidr.split('/');
  const base = parseIPv4(ip);
  if (base === undefined) throw new Error(`bad built-in range ${cidr}`);
  return { base, bits: Number(bits), cls };
}

/**
 * IPv4 ranges, most specific first: the first match wins, so the metadata addresses that sit inside
 * link-local (169.254.169.254) and CGNAT (100.100.100.200, Alibaba Cloud) are named as what they are.
 */
const RANGES4: readonly Range4[] = [
  range4('169.254.169.254/32', 'metadata'), // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
  range4('169.254.170.2/32', 'metadata'), // AWS ECS task credentials
  range4('169.254.170.23/32', 'metadata'), // AWS EKS Pod Identity
  range4('100.100.100.200/32', 'metadata'), // Alibaba Cloud
  range4('192.0.0.192/32', 'metadata'), // Oracle Cloud (classic)
  range4('0.0.0.0/32', 'unspecified'),
  range4('255.255.255.255/32', 'broadcast'),
  range4('0.0.0.0/8', 'reserved'), // "this network": Linux connects 0.x to the local host
  range4('127.0.0.0/8', 'loopback'),
  range4('10.0.0.0/8', 'private'),
  range4('172.16.0.0/12', 'private'),
  range4('192.168.0.0/16', 'private'),
  range4('169.254.0.0/16', 'link-local'),
  range4('100.64.0.0/10', 'cgnat'),
  range4('192.0.0.0/24', 'reserved'), // IETF protocol assignments
  range4('192.0.2.0/24', 'documentation'),
  range4('198.51.100.0/24', 'documentation'),
  range4('203.0.113.0/24', 'documentation'),
  range4('198.18.0.0/15', 'benchmark'),
  range4('192.88.99.0/24', 'reserved'), // deprecated 6to4 relay anycast
  range4('224.0.0.0/4', 'multicast'),
  range4('240.0.0.0/4', 'reserved'),
];

/** A dotted-quad IPv4 address as an unsigned 32-bit number, or undefined when it is not one. */
export function parseIPv4(text: string): number | undefined {
  if (isIP(text) !== 4) return undefined;
  return text.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

/**
 * An IPv6 address as eight 16-bit groups (a trailing dotted quad folded in, a `%zone` dropped), or
 * undefined when it is not one. Hand-parsed so that every embedded-IPv4 form can be unwrapped below.
 */
export function parseIPv6(text: string): number[] | undefined {
  const bare = text.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIP(bare) !== 6) return undefined;
  // A trailing dotted quad is two groups written in decimal: rewrite it as hex and parse on.
  const body = bare.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_all, a, b, c, d) =>
    [Number(a) * 256 + Number(b), Number(c) * 256 + Number(d)].map((n) => n.toString(16)).join(':'),
  );
  const hex = (part: string) => Number.parseInt(part, 16);
  const halves = body.split('::');
  const head = halves[0] ? halves[0].split(':').map(hex) : [];
  const rest = halves.length > 1 && halves[1] ? halves[1].split(':').map(hex) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 && missing !== 0) return undefined;
  const groups = [...head, ...new Array<number>(Math.max(missing, 0)).fill(0), ...rest];
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : undefined;
}

function classify4(value: number): AddressClass {
  for (const range of RANGES4) {
    const size = 2 ** (32 - range.bits);
    if (value >= range.base && value < range.base + size) return range.cls;
  }
  return 'public';
}

/** The IPv4 address held in two 16-bit groups. */
const v4Of = (high: number, low: number): number => high * 65536 + low;

/** Whether the first `bits` bits of `groups` equal those of `prefix` (given as groups). */
function within(groups: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if (((groups[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function classify6(g: number[]): AddressClass {
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  const [g0 = 0, , , , , , g6 = 0, g7 = 0] = g;
  if (zeroUpTo(8)) return 'unspecified';
  if (zeroUpTo(7) && g7 === 1) return 'loopback';
  // Forms that carry an IPv4 address: a connection to them may end at that IPv4 host (the kernel
  // for mapped addresses, a NAT64 or 6to4 gateway for the others), so they are judged by it.
  if (zeroUpTo(5) && g[5] === 0xffff) return classify4(v4Of(g6, g7)); // ::ffff:a.b.c.d mapped
  if (zeroUpTo(4) && g[4] === 0xffff && g[5] === 0) return classify4(v4Of(g6, g7)); // ::ffff:0:a.b.c.d
  if (zeroUpTo(6)) return worst(classify4(v4Of(g6, g7)), 'reserved'); // deprecated ::a.b.c.d
  if (within(g, [0x64, 0xff9b], 96)) return classify4(v4Of(g6, g7)); // NAT64 well-known prefix
  if (within(g, [0x64, 0xff9b, 1], 48)) return 'private'; // NAT64 local-use prefix
  if (g0 === 0x2002) return classify4(v4Of(g[1] ?? 0, g[2] ?? 0)); // 6to4
  if (within(g, [0x2001, 0], 32)) return 'reserved'; // Teredo: the peer is hidden in obfuscated bits
  if (within(g, [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128)) return 'metadata'; // AWS IMDS over IPv6
  if (within(g, [0xfe80], 10)) return 'link-local';
  if (within(g, [0xfec0], 10)) return 'private'; // deprecated site-local
  if (within(g, [0xfc00], 7)) return 'private'; // unique local
  if (within(g, [0xff00], 8)) return 'multicast';
  if (within(g, [0x2001, 0xdb8], 32) || within(g, [0x3fff], 20)) return 'documentation';
  if (within(g, [0x2001, 0x2], 48)) return 'benchmark';
  if (within(g, [0x100], 64)) return 'reserved'; // discard-only
  if (within(g, [0x2001], 23)) return 'reserved'; // IETF protocol assignments
  if (within(g, [0x5f00], 16)) return 'reserved'; // SRv6 SIDs
  // Only global unicast (2000::/3) is routable on the internet; anything else is unassigned.
  return within(g, [0x2000], 3) ? 'public' : 'reserved';
}

/** Of an embedded address's class and a fallback, the one that says more (anything but `public`). */
function worst(embedded: AddressClass, fallback: AddressClass): AddressClass {
  return embedded === 'public' ? fallback : embedded;
}

/**
 * Classifies an IP address (IPv4 dotted quad, or IPv6 with or without brackets and a zone id).
 * IPv4-mapped, IPv4-translated, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged by
 * the IPv4 address they carry. Anything that is not an IP address is `reserved`, so that a caller
 * who passes garbage is refused, never let through.
 */
export function classifyAddress(address: string): AddressClass {
  const v4 = parseIPv4(address);
  if (v4 !== undefined) return classify4(v4);
  const v6 = parseIPv6(address);
  return v6 ? classify6(v6) : 'reserved';
}
