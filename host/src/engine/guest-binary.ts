// The host binary embeds hutch-guest and writes it out once per guest build,
// so every box runs the guest that was built with this host.
import { existsSync, mkdirSync, renameSync, statSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { env } from "../env.ts";
import { HutchError } from "@hutch/shared";

declare const HUTCH_GUEST_SHA: string | undefined;

/** Set by `bun run build` (--define); absent when running from source. */
const buildSha = typeof HUTCH_GUEST_SHA === "string" ? HUTCH_GUEST_SHA : undefined;

async function embedded(): Promise<string | null> {
  if (!buildSha) return null;
  // Only the compiled host has this module; from source the import fails and we fall back.
  const mod = (await import("./embedded-guest.ts")) as { default: string };
  return mod.default;
}

/** Path of a guest binary on the host's disk, ready to bind into a box. */
export async function guestBinaryPath(home: string): Promise<string> {
  const override = env.guestBinary();
  if (override) {
    if (!existsSync(override))
      throw new HutchError(
        "config",
        `HUTCH_GUEST_BIN=${override} does not exist`,
        "unset HUTCH_GUEST_BIN or point it at a built hutch-guest",
      );
    return override;
  }
  const source = await embedded();
  if (!source) {
    const dev = join(import.meta.dir, "../../../dist/hutch-guest");
    if (existsSync(dev)) return dev;
    throw new HutchError("config", "no guest binary: this hutch was not built with one", "build it: bun run build");
  }
  const dir = join(home, "guest", buildSha!);
  const target = join(dir, "hutch-guest");
  const want = Bun.file(source).size;
  if (existsSync(target) && statSync(target).size === want) return target;
  mkdirSync(dir, { recursive: true });
  // Two boxes starting at once in one daemon each write their own copy; the last rename wins, both whole.
  const tmp = `${target}.tmp-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  await Bun.write(tmp, Bun.file(source));
  // Every box's own host uid must read and run it; nobody may change it. It
  // holds nothing private (it is inside dist/hutch), and every directory on
  // the way to it is 0700, so other users of the host cannot reach it.
  chmodSync(tmp, 0o555);
  renameSync(tmp, target);
  return target;
}

const hashed = new Map<string, string>();

/** The guest binary and a short sha256 naming its build (for per-build artefacts such as the VM guest disk). */
export async function guestBinary(home: string): Promise<{ path: string; sha: string }> {
  const path = await guestBinaryPath(home);
  if (buildSha && !env.guestBinary()) return { path, sha: buildSha };
  const st = statSync(path);
  const key = `${path}:${st.size}:${st.mtimeMs}`;
  let sha = hashed.get(key);
  if (!sha) {
    const h = new Bun.CryptoHasher("sha256");
    for await (const chunk of Bun.file(path).stream()) h.update(chunk);
    sha = h.digest("hex").slice(0, 16);
    hashed.set(key, sha);
  }
  return { path, sha };
}
