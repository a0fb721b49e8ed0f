// Builds the extension and packages dist/hutch.vsix (run by scripts/build.ts
// after dist/hutch exists). The extension and its webview are bundled (so the
// .vsix carries no node_modules), and this platform's hutch is copied in as
// the fallback binary (extension/README.md: size).
import { chmodSync, copyFileSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const here = import.meta.dir;
const out = join(here, "out");

export async function buildExtension(hutch: string, vsix: string): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  const bundles = [
    // The extension host runs Node and provides `vscode`.
    Bun.build({
      entrypoints: [join(here, "src/extension.ts")],
      outdir: out,
      target: "node",
      format: "cjs",
      external: ["vscode"],
      minify: true,
    }),
    Bun.build({
      entrypoints: [join(here, "src/log/view.ts")],
      outdir: out,
      naming: "log.js",
      target: "browser",
      format: "iife",
      minify: true,
    }),
    Bun.build({
      entrypoints: [join(here, "src/conversation/view.ts")],
      outdir: out,
      naming: "conversation.js",
      target: "browser",
      format: "iife",
      minify: true,
    }),
  ];
  for (const r of await Promise.all(bundles)) {
    if (!r.success) throw new Error(`extension bundle failed:\n${r.logs.map(String).join("\n")}`);
  }
  copyFileSync(join(here, "src/log/log.css"), join(out, "log.css"));
  copyFileSync(join(here, "src/conversation/conversation.css"), join(out, "conversation.css"));
  const binDir = join(here, "bin", `${process.platform}-${process.arch}`);
  rmSync(join(here, "bin"), { recursive: true, force: true });
  mkdirSync(binDir, { recursive: true });
  copyFileSync(hutch, join(binDir, "hutch"));
  chmodSync(join(binDir, "hutch"), 0o755);
  // vsce is a Node program; the bundle above stands in for dependencies.
  const vsce = join(here, "node_modules", "@vscode", "vsce", "vsce");
  const proc = Bun.spawn(["node", vsce, "package", "--no-dependencies", "--allow-missing-repository", "--skip-license", "-o", vsix], {
    cwd: here,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`vsce package exited ${code}:\n${stdout}\n${stderr}`);
}
