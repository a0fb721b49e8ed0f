// Per-box allowlists: `host`, `host:port`, `*.domain` (any subdomain, not the
// domain itself), `[v6]:port`. A pattern without a port allows 443 only.

export type AllowMatch = "ok" | "host-other-port" | null;

function split(pattern: string): { host: string; port: number } {
  const m = (pattern.startsWith("[") ? /^(\[[^\]]+\])(?::([0-9]{1,5}))?$/ : /^([^:]*)(?::([0-9]{1,5}))?$/).exec(pattern);
  if (!m) return { host: pattern.toLowerCase(), port: 443 };
  return { host: m[1]!.toLowerCase(), port: m[2] ? Number(m[2]) : 443 };
}

function hostMatches(pattern: string, host: string): boolean {
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return pattern === host;
}

export function allowedBy(allow: string[], host: string, port: number): AllowMatch {
  const h = host.toLowerCase();
  let hostSeen = false;
  for (const entry of allow) {
    const p = split(entry);
    if (!hostMatches(p.host, h)) continue;
    if (p.port === port) return "ok";
    hostSeen = true;
  }
  return hostSeen ? "host-other-port" : null;
}

/** Applies --allow/--deny/--secret/--no-secret to a policy; entries keep their order, no duplicates. */
export function changePolicy(
  policy: { allow: string[]; bindings: string[] },
  change: { allow?: string[]; deny?: string[]; bindings?: string[]; unbind?: string[] },
): { allow: string[]; bindings: string[] } {
  const norm = (s: string) => s.toLowerCase();
  const deny = new Set((change.deny ?? []).map(norm));
  const unbind = new Set(change.unbind ?? []);
  const allow = [...new Set([...policy.allow.map(norm), ...(change.allow ?? []).map(norm)])].filter((a) => !deny.has(a));
  const bindings = [...new Set([...policy.bindings, ...(change.bindings ?? [])])].filter((b) => !unbind.has(b));
  return { allow, bindings };
}
