// Which files of a work tree may go to a box. Files that look like secrets
// never go unless the user names them (`--include PATH` or a `!PATH` line in
// .hutchignore); .hutchignore holds the user's own additions in gitignore
// style. Pure, so it is tested as a table.

/** Basename patterns held back by default: environment files, private keys, credential stores. */
export const DEFAULT_DENY = [
  ".env",
  ".env.*",
  ".envrc",
  ".envrc.*",
  "id_rsa",
  "id_dsa",
  "id_ecdsa",
  "id_ed25519",
  "id_ecdsa_sk",
  "id_ed25519_sk",
  "*.pem",
  "*.key",
  "*.p12",
  "*.pfx",
  "*.jks",
  "*.keystore",
  "*.kdbx",
  ".netrc",
  "_netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
  "credentials.json",
  ".aws/credentials",
  ".docker/config.json",
  ".kube/config",
];

export const HUTCHIGNORE = ".hutchignore";

interface Rule {
  glob: InstanceType<typeof Bun.Glob>;
  negate: boolean;
  /** A pattern with a slash in it is anchored to the root; one without matches any basename. */
  anchored: boolean;
  source: string;
}

function rule(line: string, source: string): Rule | null {
  let p = line.trim();
  if (!p || p.startsWith("#")) return null;
  const negate = p.startsWith("!");
  if (negate) p = p.slice(1);
  p = p.replace(/\/+$/, "");
  const anchored = p.includes("/");
  p = p.replace(/^\/+/, "");
  return p ? { glob: new Bun.Glob(p), negate, anchored, source } : null;
}

export interface Selector {
  /** Why path is held back (the rule that matched), or null when it may go. */
  heldBack(path: string): string | null;
}

/** The deny list, then .hutchignore's lines in order, then --include: the last rule that matches wins. */
export function selector(hutchignore: string, include: string[] = []): Selector {
  const rules: Rule[] = [
    ...DEFAULT_DENY.map((p) => rule(p, `default deny list (${p})`)),
    ...hutchignore.split("\n").map((l) => rule(l, `${HUTCHIGNORE} (${l.trim()})`)),
    ...include.map((p) => rule(`!/${p}`, "--include")),
  ].filter((r): r is Rule => r !== null);
  return {
    heldBack(path) {
      let verdict: string | null = null;
      for (const r of rules) if (hits(r, path)) verdict = r.negate ? null : r.source;
      return verdict;
    },
  };
}

/** A rule matches the path or any directory above it (`secrets/` holds back everything under it). */
function hits(r: Rule, path: string): boolean {
  const parts = path.split("/");
  return parts.some((_, i) => (r.anchored ? r.glob.match(parts.slice(0, i + 1).join("/")) : r.glob.match(parts[i]!)));
}

/**
 * Which git-ignored files to carry (`--include-ignored`, `hutch.includeIgnored`):
 * gitignore-style patterns as in .hutchignore (a name matches anywhere, a path
 * with a `/` from the root, a directory takes what is under it), no negation.
 */
export function ignoredMatcher(patterns: string[]): (path: string) => boolean {
  const rules = patterns.map((p) => rule(p.replace(/^!+/, ""), "--include-ignored")).filter((r): r is Rule => r !== null);
  return (path) => rules.some((r) => hits(r, path));
}
