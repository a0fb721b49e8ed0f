// Which credentialed requests wait for a person (a binding's `approve` rules)
// and what the wait is bound to. A rule is "METHOD PATH": the method in
// capitals or `*`, the path matched whole against the normalised path the
// broker sends (route.ts), `*` standing for any characters, `/` included
// ("POST /repos/*/issues" matches /repos/o/r/issues). The query is not
// matched (as the binding's path prefixes ignore it), but it is in the digest.

/** The rule that makes this request wait, or null. */
export function approvalRule(rules: readonly string[] | undefined, method: string, path: string): string | null {
  for (const rule of rules ?? []) {
    const space = rule.indexOf(" ");
    const m = rule.slice(0, space);
    if (m !== "*" && m !== method) continue;
    if (globMatch(rule.slice(space + 1), path)) return rule;
  }
  return null;
}

function globMatch(pattern: string, path: string): boolean {
  const re = new RegExp(`^${pattern.split("*").map(literal).join(".*")}$`, "s");
  return re.test(path);
}

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
