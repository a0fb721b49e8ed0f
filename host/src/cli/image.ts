import { ImageBuildResult, ImageVerifyResult, type ImageList } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { readOp, runOp, type OpHandlers } from "../client/ops.ts";
import { progressDisplay } from "../client/progress.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

const size = (bytes: number): string =>
  bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(1)} GiB` : `${Math.round(bytes / 1024 ** 2)} MiB`;

type Named = GlobalArgs & { name: string };

/**
 * Runs an operation with its progress shown: with --json its lines as NDJSON on stdout (the result last) and
 * its notes on stderr; on a terminal a live status line.
 */
async function withProgress<T>(json: boolean, work: (h: OpHandlers) => Promise<T>): Promise<T> {
  const display = json ? null : progressDisplay();
  try {
    return await work({
      line: (l) => json && process.stdout.write(`${JSON.stringify(l)}\n`),
      progress: (p) => (json ? p.type === "note" && process.stderr.write(`hutch: ${p.text}\n`) : display!.show(p)),
    });
  } finally {
    display?.stop();
  }
}

/** The day the security updates an image has were published: "2026-11-29", "none" when its mirror was not reached, "-" for a build that predates them. */
function securityOf(sources: { suite: string; date: string | null }[] | undefined): string {
  const s = sources?.find((x) => x.suite.endsWith("-security"));
  if (!s) return "-";
  const day = s.date ? new Date(s.date) : null;
  return day && !Number.isNaN(day.getTime()) ? day.toISOString().slice(0, 10) : "none";
}

export const image = body<GlobalArgs>({
  demand: "name an image command",
  commands: [
    command<Named & { force: boolean; "no-cache": boolean; profile: "base" | "desktop" }>({
      command: "build",
      describe: "build an image from Debian packages, in the daemon (it needs root and the apt mirror)",
      options: {
        name: { type: "string", default: "default", describe: "image name" },
        force: { type: "boolean", default: false, describe: "rebuild even if an image with the same recipe exists" },
        "no-cache": {
          type: "boolean",
          default: false,
          describe:
            "make the root filesystem again from the mirror (debootstrap, updates) instead of copying the one an earlier build kept",
        },
        profile: {
          type: "string",
          choices: ["base", "desktop"],
          default: "base",
          describe: "desktop adds Chromium, Xvfb, xdotool, xterm and fonts (the browser and desktop tools)",
        },
      },
      run: async (a) => {
        // The daemon builds it (for the machine that runs the boxes); this shows its progress.
        const d = await connectDaemon(a.home);
        await withProgress(a.json, (h) =>
          runOp(d, "/v1/images/build", { name: a.name, force: a.force, noCache: a["no-cache"], profile: a.profile }, ImageBuildResult, h),
        );
      },
    }),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "list images",
      run: async (a) => {
        const all = await (await connectDaemon(a.home)).request<ImageList>("GET", "/v1/images");
        if (a.json) return printJson(all);
        if (all.length === 0) return void process.stdout.write("no images; build one: sudo hutch image build\n");
        const rows = all.map((i) =>
          i.manifest
            ? [
                i.name,
                i.manifest.kernel.release,
                String(i.manifest.packages.length),
                securityOf(i.manifest.sources),
                size(Object.values(i.manifest.files).reduce((n, f) => n + f.bytes, 0)),
                i.manifest.builtAt.slice(0, 16).replace("T", " "),
              ]
            : [i.name, `BROKEN: ${i.problem}`, "", "", "", ""],
        );
        process.stdout.write(table([["NAME", "KERNEL", "PACKAGES", "SECURITY", "SIZE", "BUILT"], ...rows]));
      },
    }),
    command<Named>({
      command: "verify <name>",
      describe: "check every file of an image against its manifest's sha256",
      run: async (a) => {
        // The daemon hashes the files where they are (a --remote's images too); this shows its counts.
        const d = await connectDaemon(a.home);
        await withProgress(a.json, (h) => readOp(d, `/v1/images/${encodeURIComponent(a.name)}/verify`, ImageVerifyResult, h));
        if (!a.json) process.stdout.write(`image ${a.name}: every file matches its manifest\n`);
      },
    }),
    command<Named>({
      command: "rm <name>",
      aliases: ["delete"],
      describe: "remove an image (refused while boxes are built on it)",
      run: async (a) => {
        // The daemon knows which boxes are built on it (it refuses then, naming them).
        await (await connectDaemon(a.home)).request("DELETE", `/v1/images/${encodeURIComponent(a.name)}`);
        if (a.json) printJson({ name: a.name, removed: true });
        else process.stdout.write(`removed image ${a.name}\n`);
      },
    }),
    command<GlobalArgs & { file: string; name?: string; force: boolean }>({
      command: "import <file>",
      describe: "install an image from a .tar of an image directory (sent to the daemon, which verifies every file)",
      options: {
        name: { type: "string", describe: "install under this name (default: the manifest's)" },
        force: { type: "boolean", default: false, describe: "replace an image of the same name" },
      },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const { importArchive } = await import("../client/image-import.ts");
        const { manifest: m } = await withProgress(a.json, (h) =>
          importArchive(d, { file: a.file, force: a.force, ...(a.name !== undefined ? { name: a.name } : {}) }, h),
        );
        if (!a.json) process.stdout.write(`imported image ${m.name} (${m.kernel.release}, ${m.packages.length} packages)\n`);
      },
    }),
  ],
});
