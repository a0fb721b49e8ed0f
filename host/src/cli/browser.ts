import type { BrowserAction } from "@hutch/shared";
import { BoxBrowser } from "../client/browser.ts";
import { connectDaemon } from "../client/daemon.ts";
import { command, body, type GlobalArgs } from "./args.ts";
import { terminalText } from "@hutch/shared/text";
import { cell, printJson } from "./output.ts";

type BoxArg = GlobalArgs & { box: string; tab?: string };
const TAB = { tab: { type: "string", describe: "the tab (tab_N); default: the last one opened" } } as const;

async function browser(a: BoxArg): Promise<BoxBrowser> {
  return new BoxBrowser(await connectDaemon(a.home), a.box);
}

function printTab(a: GlobalArgs, t: { tab: string; url: string; title: string }): void {
  if (a.json) return printJson(t);
  process.stdout.write(`${cell(t.tab)}\t${cell(t.url)}\t${cell(t.title)}\n`);
}

/** A verb that acts on one ref, answering the tab. */
function actOn(
  action: BrowserAction,
  describe: string,
  extra: Record<string, { type: "string" | "boolean"; describe: string; array?: boolean }> = {},
) {
  const positional =
    action === "type" ? "<ref> <text>" : action === "select" ? "<ref> <values..>" : action === "upload" ? "<ref> <paths..>" : "<ref>";
  return command<BoxArg & { ref: string; text?: string; values?: string[]; paths?: string[]; submit?: boolean }>({
    command: `${action} <box> ${positional}`,
    describe,
    options: { ...TAB, ...extra },
    run: async (a) => {
      const b = await browser(a);
      printTab(a, await b.act({ action, ref: a.ref, text: a.text, values: a.values, paths: a.paths, submit: a.submit }, a.tab));
    },
  });
}

export const browserVerb = body<GlobalArgs>({
  demand: "name a browser command",
  commands: [
    command<BoxArg & { url?: string }>({
      command: "open <box> [url]",
      describe: "open a tab in the box's Chromium (started on first use), at url if given",
      run: async (a) => printTab(a, await (await browser(a)).open(a.url)),
    }),
    command<BoxArg>({
      command: "tabs <box>",
      describe: "list the box's open tabs",
      run: async (a) => {
        const tabs = await (await browser(a)).tabs();
        if (a.json) return printJson(tabs);
        for (const t of tabs) printTab(a, t);
      },
    }),
    command<BoxArg & { url: string }>({
      command: "navigate <box> <url>",
      describe: "load url in a tab",
      options: TAB,
      run: async (a) => printTab(a, await (await browser(a)).navigate(a.url, a.tab)),
    }),
    command<BoxArg>({
      command: "close <box>",
      describe: "close a tab",
      options: TAB,
      run: async (a) => printTab(a, await (await browser(a)).close(a.tab)),
    }),
    command<BoxArg & { delta: boolean; "max-bytes"?: number; more?: string }>({
      command: "snapshot <box>",
      describe: 'the page as ref-tagged lines (- button "Save" [ref=e3]); act on a ref with click, type, …',
      options: {
        ...TAB,
        delta: { type: "boolean", default: false, describe: "only what changed since the tab's last snapshot" },
        "max-bytes": { type: "number", describe: "cut the answer at this size (default 24000); --more goes on" },
        more: { type: "string", describe: "the cursor a cut snapshot printed, to get its next part" },
      },
      run: async (a) => {
        const s = await (await browser(a)).snapshot({ tab: a.tab, delta: a.delta, maxBytes: a["max-bytes"], more: a.more });
        if (a.json) return printJson(s);
        process.stdout.write(`${terminalText(s.text)}\n`);
        if (s.more)
          process.stderr.write(
            `(cut: ${s.bytes} bytes in all; the rest: hutch browser snapshot ${a.box} --tab ${s.tab} --more ${s.more})\n`,
          );
      },
    }),
    actOn("click", "click an element by ref"),
    actOn("hover", "move the pointer over an element by ref"),
    actOn("type", "replace a field's text by ref", { submit: { type: "boolean", describe: "press Enter after typing" } }),
    actOn("select", "select options of a select element by value or label"),
    actOn("upload", "set a file input's files (paths in the box)"),
    command<BoxArg & { key: string; ref?: string }>({
      command: "press <box> <key>",
      describe: "press a key (Enter, Tab, Escape, ArrowDown, a, …) in the focused element or --ref",
      options: { ...TAB, ref: { type: "string", describe: "focus this element first" } },
      run: async (a) => printTab(a, await (await browser(a)).act({ action: "press", key: a.key, ref: a.ref }, a.tab)),
    }),
    command<BoxArg & { text?: string; ref?: string; timeout: number }>({
      command: "wait <box>",
      describe: "wait until the page shows --text, or --ref is on screen",
      options: {
        ...TAB,
        text: { type: "string", describe: "text to wait for" },
        ref: { type: "string", describe: "a ref to wait for" },
        timeout: { type: "number", default: 10000, describe: "give up after this many ms" },
      },
      run: async (a) => {
        const r = await (await browser(a)).wait({ text: a.text, ref: a.ref, timeoutMs: a.timeout }, a.tab);
        if (a.json) printJson(r);
      },
    }),
    command<BoxArg & { output?: string; ref?: string; "full-page": boolean }>({
      command: "screenshot <box>",
      describe: "a PNG of the tab (its viewport, --ref's element, or --full-page) to --output or stdout",
      options: {
        ...TAB,
        output: { type: "string", alias: "o", describe: "write the PNG here (default: stdout)" },
        ref: { type: "string", describe: "only this element" },
        "full-page": { type: "boolean", default: false, describe: "the whole page, not only the viewport" },
      },
      run: async (a) => {
        const { info, png } = await (await browser(a)).screenshot({ ref: a.ref, fullPage: a["full-page"] }, a.tab);
        if (a.output) await Bun.write(a.output, png);
        else process.stdout.write(png);
        if (a.json && a.output) printJson({ ...info, path: a.output });
      },
    }),
    command<BoxArg>({
      command: "console <box>",
      describe: "the tab's last console messages",
      options: TAB,
      run: async (a) => {
        const lines = await (await browser(a)).console(a.tab);
        if (a.json) return printJson(lines);
        for (const l of lines) process.stdout.write(`${cell(l.level)}\t${terminalText(l.text)}\n`);
      },
    }),
    command<BoxArg>({
      command: "network <box>",
      describe: "the tab's last requests: method, status, url",
      options: TAB,
      run: async (a) => {
        const reqs = await (await browser(a)).network(a.tab);
        if (a.json) return printJson(reqs);
        for (const r of reqs) process.stdout.write(`${cell(r.method)}\t${cell(String(r.failed ?? r.status ?? "…"))}\t${cell(r.url)}\n`);
      },
    }),
  ],
});
