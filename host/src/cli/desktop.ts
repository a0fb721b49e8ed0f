import { HutchError } from "@hutch/shared/base";
import { BoxDesktop, type DesktopInputArgs } from "../client/desktop.ts";
import { connectDaemon } from "../client/daemon.ts";
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson, table } from "./output.ts";

type BoxArg = GlobalArgs & { box: string };
type InputArg = BoxArg & {
  x?: string;
  y?: string;
  toX?: string;
  toY?: string;
  button?: number;
  steal: boolean;
  keys?: string[];
  text?: string;
};

/** A coordinate from the command line. */
function px(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,5}$/.test(v)) throw new HutchError("invalid", `${name}: ${JSON.stringify(v)} is not a pixel coordinate`);
  return Number(v);
}

async function desktop(a: BoxArg): Promise<BoxDesktop> {
  return new BoxDesktop(await connectDaemon(a.home), a.box);
}

const STEAL = { steal: { type: "boolean", default: false, describe: "take the input from the actor holding it" } } as const;
const BUTTON = { button: { type: "number", default: 1, describe: "1 left, 2 middle, 3 right" } } as const;

function inputVerb(
  name: string,
  positional: string,
  describe: string,
  args: (a: InputArg) => DesktopInputArgs,
  options: Record<string, never> | typeof BUTTON = {},
) {
  return command<InputArg>({
    command: `${name} <box> ${positional}`.trimEnd(),
    describe,
    options: { ...STEAL, ...options },
    run: async (a) => {
      const r = await (await desktop(a)).input({ ...args(a), ...(a.steal ? { steal: true } : {}) });
      if (a.json) printJson(r);
      else if (r.stolenFrom) process.stderr.write(`took the input from ${r.stolenFrom}\n`);
    },
  });
}

export const desktopVerb = body<GlobalArgs>({
  demand: "name a desktop command",
  commands: [
    command<BoxArg & { width?: number; height?: number }>({
      command: "start <box>",
      describe: "start the box's X desktop (Xvfb, 1024x768 unless sized); later programs get its DISPLAY",
      options: { width: { type: "number", describe: "pixels" }, height: { type: "number", describe: "pixels" } },
      run: async (a) => {
        const info = await (await desktop(a)).start({ width: a.width, height: a.height });
        if (a.json) return printJson(info);
        process.stdout.write(`DISPLAY=${info.display} ${info.width}x${info.height}\n`);
      },
    }),
    command<BoxArg & { output?: string }>({
      command: "screenshot <box>",
      describe: "a PNG of the whole desktop to --output or stdout",
      options: { output: { type: "string", alias: "o", describe: "write the PNG here (default: stdout)" } },
      run: async (a) => {
        const { info, png } = await (await desktop(a)).screenshot();
        if (a.output) await Bun.write(a.output, png);
        else process.stdout.write(png);
        if (a.json && a.output) printJson({ ...info, path: a.output });
      },
    }),
    command<BoxArg>({
      command: "windows <box>",
      describe: "the desktop's visible windows: id, geometry, name",
      run: async (a) => {
        const ws = await (await desktop(a)).windows();
        if (a.json) return printJson(ws);
        process.stdout.write(
          table([["ID", "GEOMETRY", "NAME"], ...ws.map((w) => [String(w.id), `${w.width}x${w.height}+${w.x}+${w.y}`, w.name])]),
        );
      },
    }),
    inputVerb("move", "<x> <y>", "move the pointer", (a) => ({ action: "move", x: px(a.x, "x"), y: px(a.y, "y") })),
    inputVerb(
      "click",
      "[x] [y]",
      "click (at x y, or where the pointer is)",
      (a) => ({ action: "click", x: px(a.x, "x"), y: px(a.y, "y"), button: a.button }),
      BUTTON,
    ),
    inputVerb(
      "drag",
      "<x> <y> <toX> <toY>",
      "press at x y, move to toX toY, release",
      (a) => ({ action: "drag", x: px(a.x, "x"), y: px(a.y, "y"), toX: px(a.toX, "toX"), toY: px(a.toY, "toY"), button: a.button }),
      BUTTON,
    ),
    inputVerb("key", "<keys..>", "press keys by X keysym name (Return, ctrl+c, a)", (a) => ({ action: "key", keys: a.keys })),
    inputVerb("type", "<text>", "type text as key events", (a) => ({ action: "type", text: a.text })),
    command<BoxArg>({
      command: "release <box>",
      describe: "give up the desktop's input so another actor may use it",
      run: async (a) => {
        const r = await (await desktop(a)).release();
        if (a.json) printJson(r);
      },
    }),
  ],
});
