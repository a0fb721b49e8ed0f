// The house's shape, checked on every run: who may import whom.
//   - host/src/daemon/ holds controllers and wiring: nothing else in host/src imports it;
//   - guest/ and extension/ import nothing from host/ (they ship apart from it);
//   - snapshot/ imports nothing from broker/ (what a snapshot takes never
//     depends on the credential broker; both read config.json through config.ts);
//   - host/src/env.ts alone reads the environment (process.env, Bun.env):
//     every variable hutch reads is named there once; a child that inherits
//     the environment, or a scan of every variable, gets it from env.all();
//   - shared/src is runtime-neutral: it imports no node:, bun: or bun module,
//     and nothing from outside shared/src but its schema library (what needs a
//     file system lives in shared/node; shared/tsconfig.json type-checks
//     shared/src with no runtime's types, so a global like Bun or process fails too);
//   - a CLI verb's code never reaches an engine (the daemon runs boxes; the
//     `hutch daemon` verb starts one in-process, so it alone is exempt);
//   - host/src/e2b/ (the E2B API's sandboxes) speaks no HTTP: the listener,
//     routes and Connect codec are daemon/e2b/'s, as for every noun folder;
//   - the NATS client (@nats-io/*) is imported only by the JetStream backends
//     (store/jetstream/, snapshot/jetstream.ts) and fleet/, which the daemon
//     loads only with --cluster: a server on its own never loads it;
//   - outside store/, state is reached through store/types.ts: a SQLite class
//     is named only where it is constructed (the daemon's wiring, and the auth
//     service), so a second backend is a second implementation, not a fork.
// Imports are read as text (static, dynamic and re-exports), and followed
// through relative paths for the CLI's closure, where type-only imports (which
// load nothing) are skipped. The `hutch daemon` verb is the daemon, so it may
// import it.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const root = join(import.meta.dir, "../..");
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|(?:^|\n)\s*import\s+["']([^"']+)["']/g;
// Type-only imports are erased at build time: for what code a verb loads, they do not count.
const RUNTIME_IMPORT =
  /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|(?:^|\n)\s*import\s+["']([^"']+)["']/g;

function sources(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => /\.(ts|mts|tsx|js|mjs)$/.test(f) && !f.includes("node_modules"))
    .map((f) => join(dir, f));
}

function specifiers(file: string, re = IMPORT): string[] {
  return [...readFileSync(file, "utf8").matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3]!).filter(Boolean);
}

/** A relative specifier as the file it names, or null for packages. */
function target(from: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  const p = resolve(dirname(from), spec);
  for (const c of [p, `${p}.ts`, join(p, "index.ts")]) if (existsSync(c) && statSync(c).isFile()) return c;
  return p;
}

const rel = (f: string) => relative(root, f);

describe("who may import whom", () => {
  test("nothing in host/src outside daemon/ imports daemon/", () => {
    const daemon = `${join(root, "host/src/daemon")}/`;
    const bad = sources(join(root, "host/src"))
      .filter((f) => !f.startsWith(daemon) && f !== join(root, "host/src/cli/daemon.ts") && f !== join(root, "host/src/cli/serve.ts"))
      .flatMap((f) => specifiers(f).map((s) => [f, target(f, s)] as const))
      .filter(([, t]) => t?.startsWith(daemon))
      .map(([f, t]) => `${rel(f)} -> ${rel(t!)}`);
    expect(bad).toEqual([]);
  });

  test("guest/ and extension/ import nothing from host/", () => {
    const host = `${join(root, "host")}/`;
    const bad = [...sources(join(root, "guest")), ...sources(join(root, "extension/src")), ...sources(join(root, "extension/test"))]
      .flatMap((f) => specifiers(f).map((s) => [f, s, target(f, s)] as const))
      .filter(([, s, t]) => t?.startsWith(host) || s.startsWith("@hutch/host"))
      .map(([f, s]) => `${rel(f)} -> ${s}`);
    expect(bad).toEqual([]);
  });

  test("snapshot/ imports nothing from broker/", () => {
    const broker = `${join(root, "host/src/broker")}/`;
    const bad = sources(join(root, "host/src/snapshot"))
      .flatMap((f) => specifiers(f).map((s) => [f, target(f, s)] as const))
      .filter(([, t]) => t?.startsWith(broker))
      .map(([f, t]) => `${rel(f)} -> ${rel(t!)}`);
    expect(bad).toEqual([]);
  });

  test("host/src/env.ts alone reads the environment", () => {
    const reader = join(root, "host/src/env.ts");
    const ENV_READ =
      /\bprocess\.env\b|\bprocess\[\s*["'`]env["'`]\s*\]|\bBun\.env\b|\bimport\.meta\.env\b|\benv\b[^;]*from\s+["'](?:node:)?process["']/;
    const bad = sources(join(root, "host/src"))
      .filter((f) => f !== reader && ENV_READ.test(readFileSync(f, "utf8")))
      .map(rel);
    expect(bad).toEqual([]);
  });

  test("shared/src imports no runtime's modules and nothing outside shared/src but TypeBox", () => {
    const src = `${join(root, "shared/src")}/`;
    const bad = sources(src)
      .flatMap((f) => specifiers(f).map((s) => [f, s, target(f, s)] as const))
      .filter(([, s, t]) => (t ? !t.startsWith(src) : !s.startsWith("@sinclair/typebox")))
      .map(([f, s]) => `${rel(f)} -> ${s}`);
    expect(bad).toEqual([]);
  });

  test("no CLI verb's code reaches an engine (but `hutch daemon`, which runs one in-process)", () => {
    const engine = `${join(root, "host/src/engine")}/`;
    // `hutch serve` is the daemon too, listening on TCP as well.
    const daemonVerb = join(root, "host/src/cli/daemon.ts");
    const serveVerb = join(root, "host/src/cli/serve.ts");
    const seen = new Map<string, string>();
    const stack = sources(join(root, "host/src/cli")).filter((f) => f !== daemonVerb && f !== serveVerb);
    for (const f of stack) seen.set(f, rel(f));
    const bad: string[] = [];
    while (stack.length > 0) {
      const f = stack.pop()!;
      for (const s of specifiers(f, RUNTIME_IMPORT)) {
        const t = target(f, s);
        if (!t || t === daemonVerb || t === serveVerb || seen.has(t) || !existsSync(t)) continue;
        seen.set(t, `${seen.get(f)} -> ${rel(t)}`);
        if (t.startsWith(engine)) bad.push(seen.get(t)!);
        else stack.push(t);
      }
    }
    expect(bad).toEqual([]);
  });

  test("outside store/, only the wiring names a SQLite store class", () => {
    const store = `${join(root, "host/src/store")}/`;
    // jetstream/cluster.ts is the JetStream plumbing (cluster name, retries, the unavailable error) that a
    // JetStream backend living beside its interface's other backend (snapshot/jetstream.ts) uses; it holds no state.
    const open = new Set(["types.ts", "snapshot-backend.ts", "db.ts", "migrations.ts", "jetstream/cluster.ts"].map((f) => join(store, f)));
    // fleet/index.ts is a fleet server's wiring: it opens the fleet's stores (the session log's replica on this server's file).
    const wiring = new Set([
      join(root, "host/src/daemon/services.ts"),
      join(root, "host/src/auth/service.ts"),
      join(root, "host/src/fleet/index.ts"),
    ]);
    const bad = sources(join(root, "host/src"))
      .filter((f) => !f.startsWith(store) && !wiring.has(f))
      .flatMap((f) => specifiers(f).map((s) => [f, target(f, s)] as const))
      .filter(([, t]) => t?.startsWith(store) && !open.has(t))
      .map(([f, t]) => `${rel(f)} -> ${rel(t!)}`);
    expect(bad).toEqual([]);
  });
  test("only the JetStream backends and fleet/ import the NATS client", () => {
    const allowed = [join(root, "host/src/store/jetstream/"), join(root, "host/src/fleet/")];
    const bad = sources(join(root, "host/src"))
      .filter((f) => !allowed.some((d) => f.startsWith(d)) && f !== join(root, "host/src/snapshot/jetstream.ts"))
      .filter((f) => specifiers(f).some((s) => s.startsWith("@nats-io/")))
      .map(rel);
    expect(bad).toEqual([]);
    // What the daemon and `hutch serve` load before they know of --cluster: static imports only (fleet/ is import()ed).
    const STATIC_IMPORT = /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^;]*?from\s+["']([^"']+)["']|(?:^|\n)\s*import\s+["']([^"']+)["']/g;
    const stack = [join(root, "host/src/daemon/server.ts"), join(root, "host/src/cli/serve.ts")];
    const seen = new Set(stack);
    const loaded: string[] = [];
    while (stack.length > 0) {
      const f = stack.pop()!;
      for (const s of specifiers(f, STATIC_IMPORT)) {
        if (s.startsWith("@nats-io/")) loaded.push(rel(f));
        const t = target(f, s);
        if (!t || seen.has(t) || !existsSync(t)) continue;
        seen.add(t);
        stack.push(t);
      }
    }
    expect(loaded).toEqual([]);
  });

  test("host/src/e2b/ speaks no HTTP: no server, no Response, no Elysia", () => {
    const bad = sources(join(root, "host/src/e2b")).filter((f) =>
      /Bun\.serve\(|new Response\(|Response\.json\(|from\s+["']elysia["']/.test(readFileSync(f, "utf8")),
    );
    expect(bad.map(rel)).toEqual([]);
  });
});
