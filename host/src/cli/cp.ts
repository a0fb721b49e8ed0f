import type { CommandModule } from "yargs";
import { connectDaemon } from "../client/daemon.ts";
import { printJson } from "./output.ts";
import type { GlobalArgs } from "./main.ts";

type CpArgs = GlobalArgs & { src: string; dst: string };

export const cpCommand: CommandModule<GlobalArgs, CpArgs> = {
  command: "cp <src> <dst>",
  describe: "copy files or directories into or out of a box (BOX:/path names the box side)",
  builder: (y) =>
    y
      .positional("src", { type: "string", demandOption: true })
      .positional("dst", { type: "string", demandOption: true })
      .example("$0 cp ./src web:/workspace", "copy a directory in")
      .example("$0 cp web:/workspace/out ./out", "copy it back out"),
  handler: async (a) => {
    const { copy, parseCpArg } = await import("../client/copy.ts");
    const d = await connectDaemon(a.home);
    const r = await copy(d, parseCpArg(a.src), parseCpArg(a.dst));
    if (a.json) printJson({ src: a.src, dst: a.dst, ...r });
    else process.stderr.write(`copied ${r.entries} entries, ${r.bytes} bytes\n`);
  },
};
