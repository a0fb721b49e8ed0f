// `bun run build`: the guests (linux-x64, linux-arm64), then `hutch` for this
// host and for every other platform Bun cross-compiles to, each with the
// guest its VMs run embedded. The guest's sha256 is baked into the host, so
// each host writes out exactly the guest it was built with
// (host/src/engine/guest-binary.ts).
//
// Last, dist/hutch.vsix: the VS Code extension (extension/build.ts).
//
//   HUTCH_BUILD_TARGETS=host bun run build   # only dist/hutch, dist/hutch-guest and dist/hutch.vsix
//   HUTCH_BUILD_TARGETS=cross bun run build  # only the other platforms' (after a host build: scripts/test
//                                            # runs it beside the tests, which need only this host's)
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { COMPILE, HOST_COMPILE, HOST_WORKERS } from "./compile.ts";

const root = join(import.meta.dir, "..");
const dist = join(root, "dist");
const embed = join(dist, ".embed");
mkdirSync(embed, { recursive: true });

async function run(argv: string[]): Promise<void> {
  const proc = Bun.spawn(argv, { cwd: root, stdout: "ignore", stderr: "pipe" });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`${argv.join(" ")} exited ${code}:\n${err}`);
}

async function sha(path: string): Promise<string> {
  const h = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) h.update(chunk);
  return h.digest("hex").slice(0, 16);
}

const t0 = performance.now();
const step = (msg: string) => process.stderr.write(`build: ${msg} (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);

// Guests run inside boxes, so they are Linux binaries for the VM's architecture.
const guests = { x64: join(dist, "hutch-guest"), arm64: join(dist, "hutch-guest-linux-arm64") } as const;

/** Host targets: [bun target, output name, guest architecture]. The first is this host. */
const hosts: [string | null, string, keyof typeof guests][] = [
  [null, "hutch", process.arch === "arm64" ? "arm64" : "x64"],
  ["bun-linux-arm64", "hutch-linux-arm64", "arm64"],
  ["bun-darwin-arm64", "hutch-darwin-arm64", "arm64"],
  ["bun-darwin-x64", "hutch-darwin-x64", "x64"],
  ["bun-windows-x64", "hutch-windows-x64.exe", "x64"],
];
const targets = process.env.HUTCH_BUILD_TARGETS ?? "all";
const chosen = ({ all: hosts, host: hosts.slice(0, 1), cross: hosts.slice(1) } as Record<string, typeof hosts>)[targets];
if (!chosen) {
  console.error(`build: HUTCH_BUILD_TARGETS is "${targets}"; use host, cross, or leave it unset for every target`);
  process.exit(2);
}
if (targets === "cross" && !existsSync(guests.x64)) {
  console.error(`build: ${guests.x64} is missing: a cross build follows a host build (HUTCH_BUILD_TARGETS=host bun run build)`);
  process.exit(2);
}

if (targets !== "cross") {
  step("dist/hutch-guest");
  await run([...COMPILE, "guest/src/main.ts", "--outfile", guests.x64]);
}
if (targets !== "host") {
  step("dist/hutch-guest-linux-arm64");
  await run([...COMPILE, "--target=bun-linux-arm64", "guest/src/main.ts", "--outfile", guests.arm64]);
}

for (const [target, out, guestArch] of chosen) {
  const guest = guests[guestArch];
  const guestSha = await sha(guest);
  // The host imports dist/.embed/hutch-guest as a file asset: stage this target's guest there.
  copyFileSync(guest, join(embed, "hutch-guest"));
  step(`dist/${out} (guest ${guestArch} ${guestSha})`);
  await run([
    ...HOST_COMPILE,
    ...(target ? [`--target=${target}`] : []),
    "--define",
    `HUTCH_GUEST_SHA="${guestSha}"`,
    "host/src/main.ts",
    ...HOST_WORKERS,
    "--outfile",
    join(dist, out),
  ]);
}
// The VS Code extension, with this host's hutch bundled as its fallback binary.
if (targets !== "cross") {
  step("dist/hutch.vsix");
  const { buildExtension } = await import("../extension/build.ts");
  await buildExtension(join(dist, "hutch"), join(dist, "hutch.vsix"));
}
step("done");
