// `bun run build`: dist/hutch-guest, then dist/hutch with that guest embedded.
// The guest's sha256 is baked into the host, so each host writes out exactly
// the guest it was built with (host/src/engine/guest-binary.ts).
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const dist = join(root, "dist");
mkdirSync(dist, { recursive: true });

async function run(argv: string[]): Promise<void> {
  const proc = Bun.spawn(argv, { cwd: root, stdout: "inherit", stderr: "inherit" });
  const code = await proc.exited;
  if (code !== 0) throw new Error(`${argv.join(" ")} exited ${code}`);
}

const common = ["bun", "build", "--compile", "--minify", "--sourcemap=none", "--bytecode", "--format=esm"];
const t0 = performance.now();
process.stderr.write("building dist/hutch-guest\n");
await run([...common, "guest/src/main.ts", "--outfile", join(dist, "hutch-guest")]);
const sha = new Bun.CryptoHasher("sha256").update(await Bun.file(join(dist, "hutch-guest")).arrayBuffer()).digest("hex").slice(0, 16);
process.stderr.write(`building dist/hutch (guest ${sha})\n`);
await run([...common, `--define`, `HUTCH_GUEST_SHA="${sha}"`, "host/src/main.ts", "--outfile", join(dist, "hutch")]);
process.stderr.write(`built in ${Math.round(performance.now() - t0)} ms\n`);
