// Terminal control sequences written by others (an annotation's text and
// anchor, a box's output, an error a client logged) reach `session log` and
// `session transcript` escaped: no ESC, BEL or C1 byte and no bidi control
// gets to the reader's terminal, while --json keeps the exact text.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Events } from "../../shared/src/index.ts";
import { fixtureEvent } from "../fixtures/events.ts";
import { makeHome, waitFor, type Home } from "../helpers.ts";

// OSC 52 clipboard write, title change, screen clear, full reset, C1 CSI, bidi override.
const HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07 \x1b[2J \x1bc \u009b2J \u202eevil";
const PATH = "src/\x1b]52;c;aGk=\x07a\u202e.ts";
/** Anything a terminal acts on, or that reorders what is read. */
const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

let h: Home;
let sid: string;

async function cli(args: string[]): Promise<string> {
  const r = await h.run(args);
  if (r.code !== 0) throw new Error(`hutch ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

beforeAll(async () => {
  h = makeHome("hutch-escapes-");
  await cli(["box", "create", "esc", "--start"]);
  sid = (await cli(["run", "esc", "--detach"])).trim();
});
afterAll(() => h.cleanup());

describe("sequences from others arrive escaped", () => {
  test("an annotation's text and anchor path: session log shows them escaped, --json keeps them exact", async () => {
    await cli(["session", "annotate", sid, HOSTILE, "--anchor", `${PATH}:3`]);
    const log = await cli(["session", "log", sid]);
    expect(log).not.toMatch(RAW);
    expect(log).toContain(
      "✎ \\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b]0;pwned\\x07 \\x1b[2J \\x1bc \\x9b2J \\u202eevil @ src/\\x1b]52;c;aGk=\\x07a\\u202e.ts:3",
    );
    const json = await cli(["session", "log", sid, "--json"]);
    expect(json).not.toMatch(RAW);
    const note = json
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; data: { text: string; anchor?: { path: string } } })
      .find((e) => e.kind === "annotation.added")!;
    // The daemon stored exactly what was sent.
    expect(note.data.text).toBe(HOSTILE);
    expect(note.data.anchor?.path).toBe(PATH);
  });

  test("session watch shows the annotation escaped", async () => {
    const watch = h.spawn(["session", "watch", sid]);
    let out = "";
    const reader = (watch.stdout as ReadableStream<Uint8Array>).getReader();
    await waitFor("the annotation on the watch", async () => {
      const { value } = await reader.read();
      out += new TextDecoder().decode(value);
      return out.includes("src/");
    });
    watch.kill();
    expect(out).not.toMatch(RAW);
    expect(out).toContain("\\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b]0;pwned\\x07 \\x1b[2J \\x1bc \\x9b2J \\u202eevil @ src/");
  });

  test("what the box's terminal printed: session log drops its sequences and escapes the rest", async () => {
    await cli(["session", "driver", "acquire", sid]);
    // printf turns the octal escapes into the real bytes on the box's terminal.
    await cli(["session", "send", sid, "printf 'A\\033]52;c;aGk=\\007B\\033]0;t\\007C\\033[2JD\\033cE\\302\\233F\\342\\200\\256G\\n'"]);
    const log = await waitFor("the printed line in the log", async () => {
      const out = await cli(["session", "log", sid]);
      return /│ ABCDE/.test(out) ? out : null;
    });
    expect(log).not.toMatch(RAW);
    // The C1 CSI with its final byte F is a sequence, dropped like its ESC [ form; the bidi override is escaped.
    expect(log).toContain("│ ABCDE\\u202eG");
  });

  test("an error a client logged, and input typed into the box: session transcript shows them escaped", async () => {
    const r = await fetch(`http://localhost/v1/sessions/${sid}/events`, {
      method: "POST",
      unix: join(h.home, "hutch.sock"),
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ events: [fixtureEvent(Events.errorRaised, { message: HOSTILE })] }),
    });
    expect(r.status).toBe(200);
    // Last: the shell's line editor acts on what it is typed, so nothing is typed after this.
    await cli(["session", "send", sid, `# ${HOSTILE}`]);
    const t = await cli(["session", "transcript", sid]);
    expect(t).not.toMatch(RAW);
    expect(t).toContain("!! \\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b]0;pwned\\x07 \\x1b[2J \\x1bc \\x9b2J \\u202eevil");
    expect(t).toContain(": # \\x1b]52;c;cm0gLXJmIH4=\\x07");
  });
});
