// Exclude rules for snapshots, gitignore's syntax (a subset), shared because
// the host walks a stopped box's disk and the guest a running box's tree,
// and both must leave out the same things.
//
//   # comment, blank lines      ignored
//   name                        a file or directory with this name, at any depth
//   dir/                        directories only
//   /top or a/b                 anchored: relative to where the rules live
//   * ? [abc] **                within a name, one character, a set, any depth
//   !pattern                    re-include what an earlier rule excluded
//
// The last rule that matches decides, and deeper rule files come later (as
// in git). A directory excluded is not entered, so nothing under it can be
// re-included. Rule files come from a box, so they are bounded, and matching
// is by table, never by a backtracking regex.

export const IGNORE_LIMITS = { fileBytes: 64 * 1024, rules: 1000, patternChars: 256, files: 1000 } as const;

interface Rule {
  /** The pattern's components; "**" alone is any number of directories. */
  segs: string[];
  negate: boolean;
  dirOnly: boolean;
  /** Matched against the basename rather than the path below the rules' base. */
  name: boolean;
}

/**
 * One component against one glob component: `*`, `?`, `[set]`, `\x`.
 * The greedy matcher with one backtrack point (the last star): O(n·m) at
 * worst, never exponential, whatever a box's rule file holds.
 */
function matchSegment(glob: string, text: string): boolean {
  let g = 0;
  let t = 0;
  let starG = -1;
  let starT = 0;
  while (t < text.length) {
    const c = glob[g];
    if (c === "*") {
      while (glob[g] === "*") g++;
      starG = g;
      starT = t;
      continue;
    }
    if (c !== undefined) {
      const step = matchOne(glob, g, text[t]!);
      if (step > 0) {
        g += step;
        t++;
        continue;
      }
    }
    if (starG < 0) return false;
    g = starG;
    t = ++starT;
  }
  while (glob[g] === "*") g++;
  return g === glob.length;
}

/** How many glob characters matched `ch` at g (0: no match). */
function matchOne(glob: string, g: number, ch: string): number {
  const c = glob[g]!;
  if (c === "?") return 1;
  if (c === "\\" && g + 1 < glob.length) return glob[g + 1] === ch ? 2 : 0;
  if (c === "[") {
    const close = glob.indexOf("]", g + 2);
    if (close < 0) return ch === "[" ? 1 : 0;
    let i = g + 1;
    const neg = glob[i] === "!" || glob[i] === "^";
    if (neg) i++;
    let hit = false;
    for (; i < close; i++) {
      if (glob[i + 1] === "-" && i + 2 < close) {
        if (ch >= glob[i]! && ch <= glob[i + 2]!) hit = true;
        i += 2;
      } else if (glob[i] === ch) hit = true;
    }
    return hit !== neg ? close - g + 1 : 0;
  }
  return c === ch ? 1 : 0;
}

/** Path components against pattern components, "**" spanning any number: a table over both, O(p·s). */
function matchPath(segs: string[], parts: string[]): boolean {
  let row = new Array<boolean>(parts.length + 1).fill(false);
  row[0] = true;
  for (const seg of segs) {
    const next = new Array<boolean>(parts.length + 1).fill(false);
    if (seg === "**") {
      let any = false;
      for (let j = 0; j <= parts.length; j++) {
        any = any || row[j]!;
        next[j] = any;
      }
    } else {
      for (let j = 1; j <= parts.length; j++) next[j] = row[j - 1]! && matchSegment(seg, parts[j - 1]!);
    }
    row = next;
  }
  return row[parts.length]!;
}

/** One rule, or null for a blank line, a comment or a pattern too long to take. */
function parseRule(line: string): Rule | null {
  let p = line.replace(/(?<!\\)\s+$/, "");
  if (p === "" || p.startsWith("#") || p.length > IGNORE_LIMITS.patternChars) return null;
  const negate = p.startsWith("!");
  if (negate) p = p.slice(1);
  const dirOnly = p.endsWith("/");
  if (dirOnly) p = p.replace(/\/+$/, "");
  if (p === "") return null;
  const name = !p.includes("/");
  p = p.replace(/^\/+/, "");
  if (p === "") return null;
  // Within one component "**" is just a star.
  const segs = p
    .split("/")
    .filter((x) => x !== "")
    .map((x) => (x === "**" ? x : x.replace(/\*{2,}/g, "*")));
  return { segs, negate, dirOnly, name };
}

/** The rules of one place: a rule file's directory, or the top for configured excludes. */
export class IgnoreRules {
  private constructor(
    /** Where the rules live, relative to the walk's top ("" for the top itself), with no trailing slash. */
    readonly base: string,
    private readonly rules: Rule[],
  ) {}

  static parse(lines: string[] | string, base = ""): IgnoreRules {
    const list = typeof lines === "string" ? lines.split("\n") : lines;
    const rules: Rule[] = [];
    for (const l of list) {
      const r = parseRule(l);
      if (r) rules.push(r);
      if (rules.length >= IGNORE_LIMITS.rules) break;
    }
    return new IgnoreRules(base, rules);
  }

  get size(): number {
    return this.rules.length;
  }

  /** true excluded, false re-included, undefined when no rule here matches. `path` is relative to the walk's top. */
  decide(path: string, isDir: boolean): boolean | undefined {
    let rel = path;
    if (this.base !== "") {
      if (!path.startsWith(`${this.base}/`)) return undefined;
      rel = path.slice(this.base.length + 1);
    }
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    let out: boolean | undefined;
    for (const r of this.rules) {
      if (r.dirOnly && !isDir) continue;
      if (r.name ? matchSegment(r.segs[0]!, name) : matchPath(r.segs, rel.split("/"))) out = !r.negate;
    }
    return out;
  }
}

/** Every rule set of a walk, in order (configured first, then rule files as they are found, shallower first). */
export class Ignorer {
  private readonly sets: IgnoreRules[] = [];

  constructor(
    sets: IgnoreRules[] = [],
    /** Excluded whatever any other rule says (negations here are ignored). */
    private readonly forced?: IgnoreRules,
  ) {
    this.sets.push(...sets.filter((s) => s.size > 0));
  }

  /** Adds a rule file's rules; false (and nothing added) once IGNORE_LIMITS.files have been taken. */
  add(set: IgnoreRules): boolean {
    if (this.sets.length >= IGNORE_LIMITS.files) return false;
    if (set.size > 0) this.sets.push(set);
    return true;
  }

  ignored(path: string, isDir: boolean): boolean {
    if (this.forced?.decide(path, isDir) === true) return true;
    let out = false;
    for (const s of this.sets) {
      const d = s.decide(path, isDir);
      if (d !== undefined) out = d;
    }
    return out;
  }
}

/**
 * Rules written for a snapshot's top ("workspace/node_modules/", "*.log")
 * as the rules of one root walked on its own (`name` is its top directory):
 * unanchored patterns apply as they are; anchored ones only if their first
 * component matches the root, without it.
 */
export function rulesForRoot(patterns: string[], name: string): string[] {
  const out: string[] = [];
  for (const line of patterns) {
    const negate = line.startsWith("!");
    const body = negate ? line.slice(1) : line;
    const trimmed = body.replace(/\/+$/, "");
    if (!trimmed.replace(/^\/+/, "").includes("/")) {
      // Unanchored, or anchored at the top itself ("/workspace"): the latter names the root, which is never left out.
      if (!body.startsWith("/")) out.push(line);
      continue;
    }
    const parts = body.replace(/^\/+/, "").split("/");
    const first = parts[0]!;
    if (first === "**") {
      out.push(line);
      continue;
    }
    if (!matchSegment(first, name)) continue;
    const rest = parts.slice(1).join("/");
    if (rest !== "") out.push(`${negate ? "!" : ""}/${rest}`);
  }
  return out;
}
