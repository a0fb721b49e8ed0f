import { connectDaemon } from "../client/daemon.ts";
import { body, type GlobalArgs } from "./args.ts";
import { printJson } from "./output.ts";
import { count } from "@hutch/shared/text";

type CpArgs = GlobalArgs & { src: string; dst: string };

export const cp = body<CpArgs>({
  examples: [
    ["$0 cp ./src web:/workspace", "copy a directory in"],
    ["$0 cp web:/workspace/out ./out", "copy it back out"],
  ],
  run: async (a) => {
    const { copy, parseCpArg } = await import("../client/copy.ts");
    const d = await connectDaemon(a.home);
    const r = await copy(d, parseCpArg(a.src), parseCpArg(a.dst));
    if (a.json) printJson({ src: a.src, dst: a.dst, ...r });
    else process.stderr.write(`copied ${count(r.entries, "entry", "entries")}, ${count(r.bytes, "byte")}\n`);
  },
});
