// `hutch pool`: warm pools (host/src/box/pool.ts). Parses flags and calls the daemon.
import { ENGINE_NAMES, HutchError } from "@hutch/shared/base";
import type { PoolCleared, PoolStatus } from "@hutch/shared";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { parseMemory } from "./box.ts";
import { print, printJson, table } from "./output.ts";

type SetArgs = GlobalArgs & { image: string; warm?: number; engine?: string; cpus?: number; memory?: string; disk?: string };
type ClearArgs = GlobalArgs & { image: string; engine?: string };

const ENGINE = {
  type: "string",
  choices: ENGINE_NAMES,
  describe: "the engine its boxes run on (process pools are of image default: the host's own system)",
  defaultDescription: "qemu",
} as const;

function lines(pools: PoolStatus[]): string {
  if (pools.length === 0) return "no warm pools; keep two VM boxes ready: hutch pool set default --warm 2\n";
  return table([
    ["SERVER", "IMAGE", "ENGINE", "WANTED", "READY", "FILLING", "LIMITS", "FAILED"],
    ...pools.map((p) => [
      p.server,
      p.image,
      p.engine,
      String(p.wanted),
      String(p.ready),
      String(p.filling),
      [p.cpus ? `${p.cpus} cpus` : "", p.memoryMiB ? `${p.memoryMiB} MiB` : "", p.disk ? `disk ${p.disk}` : ""]
        .filter(Boolean)
        .join(", ") || "-",
      p.failed ? `${p.failed}: ${(p.lastError ?? "").split("\n")[0]!.slice(0, 80)}` : "-",
    ]),
  ]);
}

export const pool = body<GlobalArgs>({
  demand: "name a pool command",
  commands: [
    command<SetArgs>({
      command: "set <image>",
      describe: "keep this many sleeping, booted boxes of an image ready on each server (0 removes the pool and its boxes)",
      positionals: { image: { describe: "the image (hutch image list)" } },
      options: {
        warm: { type: "number", describe: "boxes each server keeps ready (0 removes the pool)" },
        engine: ENGINE,
        cpus: { type: "number", describe: "the pool's boxes' CPUs (a create must ask the same to get one)" },
        memory: { type: "string", describe: "their memory, e.g. 2G (likewise)" },
        disk: { type: "string", describe: "their disk size, e.g. 20G (likewise)" },
      },
      examples: [["$0 pool set default --warm 2", "two VM boxes of the default image ready: box create NAME --image default claims one"]],
      run: async (a) => {
        if (a.warm === undefined)
          throw new HutchError("invalid", "say how many boxes to keep ready", `e.g. hutch pool set ${a.image} --warm 2`);
        if (!Number.isInteger(a.warm) || a.warm < 0)
          throw new HutchError("invalid", `--warm ${a.warm}: expected a whole number of boxes, 0 or more`, "e.g. --warm 2");
        const d = await connectDaemon(a.home);
        const pools = await d.request<PoolStatus[]>("PUT", "/v1/pools", {
          image: a.image,
          warm: a.warm,
          ...(a.engine ? { engine: a.engine } : {}),
          ...(a.cpus !== undefined ? { cpus: a.cpus } : {}),
          ...(a.memory ? { memoryMiB: parseMemory(a.memory) } : {}),
          ...(a.disk ? { disk: a.disk } : {}),
        });
        if (a.json) return printJson(pools);
        process.stdout.write(
          a.warm === 0
            ? `pool ${a.image} removed; its boxes are being thrown away\n`
            : `pool ${a.image}: ${a.warm} boxes kept ready on each server; filling in the background (hutch pool list)\n`,
        );
      },
    }),
    command<GlobalArgs>({
      command: "list",
      aliases: ["ls"],
      describe: "each server's warm pools: wanted, ready, being booted",
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const pools = await d.request<PoolStatus[]>("GET", "/v1/pools");
        if (a.json) return printJson(pools);
        await print(lines(pools));
      },
    }),
    command<ClearArgs>({
      command: "clear <image>",
      describe: "remove a warm pool and its boxes",
      options: { engine: ENGINE },
      run: async (a) => {
        const d = await connectDaemon(a.home);
        const r = await d.request<PoolCleared>("DELETE", `/v1/pools/${a.engine ?? "qemu"}/${encodeURIComponent(a.image)}`);
        if (a.json) return printJson(r);
        process.stdout.write(
          r.cleared ? `pool ${a.image} removed; its boxes are being thrown away\n` : `no pool ${a.image} (${r.engine})\n`,
        );
      },
    }),
  ],
});
