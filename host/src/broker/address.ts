// Which addresses CONNECT may never reach unless a pin names them: private,
// loopback, link-local (cloud metadata lives there), and other non-public space.
import { isIP } from "node:net";

const V4_BLOCKED: [string, number][] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

function v4ToInt(ip: string): number {
  return ip.split(".").reduce((acc, part) => (acc << 8) + Number(part), 0) >>> 0;
}

function inV4(ip: string, [base, bits]: [string, number]): boolean {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (v4ToInt(ip) & mask) === (v4ToInt(base) & mask);
}

/** Expands an IPv6 literal to 8 groups. */
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  const tail: number[] = [];
  const v4 = text.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const n = v4ToInt(v4[1]!);
    tail.push(n >>> 16, n & 0xffff);
    text = `${text.slice(0, -v4[1]!.length)}0:0`;
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const a = head ? head.split(":").map((h) => parseInt(h, 16)) : [];
  const b = rest !== undefined && rest !== "" ? rest.split(":").map((h) => parseInt(h, 16)) : [];
  const groups = rest === undefined ? a : [...a, ...new Array(8 - a.length - b.length).fill(0), ...b];
  if (v4) groups.splice(6, 2, ...tail);
  return groups;
}

/** The reason an address is off limits, or null if it is public. */
export function blockedReason(ip: string): string | null {
  const family = isIP(ip);
  if (family === 4) {
    const hit = V4_BLOCKED.find((r) => inV4(ip, r));
    return hit ? `${ip} is in ${hit[0]}/${hit[1]} (private, loopback, link-local or reserved)` : null;
  }
  if (family !== 6) return `${ip} is not an IP address`;
  const g = v6Groups(ip);
  if (g.every((x) => x === 0)) return `${ip} is the unspecified address`;
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return `${ip} is loopback`;
  // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) carry an IPv4 address: judge that.
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0);
  if (mapped || nat64) {
    const v4 = `${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`;
    const inner = blockedReason(v4);
    return inner ? `${ip} maps to ${inner}` : null;
  }
  if ((g[0]! & 0xfe00) === 0xfc00) return `${ip} is a unique local address (fc00::/7)`;
  if ((g[0]! & 0xffc0) === 0xfe80) return `${ip} is link-local (fe80::/10)`;
  if ((g[0]! & 0xff00) === 0xff00) return `${ip} is multicast`;
  return null;
}
