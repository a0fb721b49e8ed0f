// What an agent or another user wrote reaches the reader's terminal escaped:
// the transcript (agent messages, deltas, tools, raw lines, errors) and the
// event lines of `session log`/`watch` carry no control or bidi character.
// The CLI end to end: tests/e2e/escapes.test.ts.
import { describe, expect, test } from "bun:test";
import { Events } from "@hutch/shared";
import { plain, renderEvent } from "../src/client/render.ts";
import type { DaemonClient } from "../src/client/daemon.ts";
import { renderTranscript } from "../src/client/transcript.ts";
import { FIXTURE_AGENT, FIXTURE_USER, fixtureLog } from "../../tests/fixtures/events.ts";

// OSC 52 clipboard write, title change, screen clear, full reset, C1 CSI, bidi override.
const HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07 \x1b[2J \x1bc \u009b2J \u202eevil";
const SHOWN = "\\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b]0;pwned\\x07 \\x1b[2J \\x1bc \\x9b2J \\u202eevil";
const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

const ev = fixtureLog("ses_x", FIXTURE_AGENT);

describe("the transcript", () => {
  test("an agent's message, its deltas, tools and raw lines arrive escaped", () => {
    const text = renderTranscript([
      ev(Events.inputSent, { text: `do it ${HOSTILE}\n` }, FIXTURE_USER),
      ev(Events.messageCompleted, { id: "m1", role: "assistant", text: `line one\n${HOSTILE}` }),
      ev(Events.toolCalled, { id: "t\x1b[2J", name: "Bash\u202e", input: { command: HOSTILE } }),
      ev(Events.toolCompleted, { id: "t1", output: HOSTILE, status: "ok" }),
      ev(Events.agentRaw, { line: HOSTILE, reason: "stderr" }),
      ev(Events.agentState, { state: "error", reason: HOSTILE }),
      ev(Events.messageDelta, { id: "m2", text: HOSTILE }),
    ]);
    expect(text).not.toMatch(RAW);
    expect(text).toBe(
      [
        `> alice: do it ${SHOWN}`,
        "assistant:",
        "  line one",
        `  ${SHOWN}`,
        "tool Bash\\u202e [t\\x1b[2J]",
        '  {"command":"\\u001b]52;c;cm0gLXJmIH4=\\u0007 \\u001b]0;pwned\\u0007 \\u001b[2J \\u001bc \\u009b2J \\u202eevil"}',
        "  → ok",
        `    ${SHOWN}`,
        `?? (stderr) ${SHOWN}`,
        `-- error: ${SHOWN}`,
        "assistant (incomplete, m2):",
        `  ${SHOWN}`,
        "",
      ].join("\n"),
    );
  });
});

/** Only output.appended reads the daemon (its chunk's bytes): these events never do. */
const noDaemon = {
  bytes: () => {
    throw new Error("no daemon in this test");
  },
} as unknown as DaemonClient;

describe("session log lines", () => {
  const ev = fixtureLog("ses_y", FIXTURE_AGENT);
  test("an annotation's text and anchor, and the actor, are escaped; a note of several lines cannot forge a line", async () => {
    const e = ev(
      Events.annotationAdded,
      { text: `${HOSTILE}\n#99 00:00:00 root ✎ forged`, anchor: { path: "a\n\x1b[2Jb.ts", line: 3 } },
      {
        kind: "user",
        id: "bob\x1bc",
      },
    );
    const line = await renderEvent(noDaemon, e);
    expect(line).not.toMatch(RAW);
    expect(line).toBe(`#1 18:00:00 bob\\x1bc ✎ ${SHOWN}\n#1 18:00:00 bob\\x1bc ✎ #99 00:00:00 root ✎ forged @ a\\x0a\\x1b[2Jb.ts:3`);
  });

  test("a kind without its own line shows its data as JSON with no raw control", async () => {
    const line = await renderEvent(noDaemon, ev(Events.errorRaised, { message: HOSTILE }));
    expect(line).not.toMatch(RAW);
    expect(JSON.parse(line.slice(line.indexOf("{")))).toEqual({ message: HOSTILE });
  });

  test.each([
    ["colours and a title are dropped", "\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok", "red ok"],
    ["OSC 52 ended by ST, and its 8-bit form", "a\x1b]52;c;aGk=\x1b\\b\u009d52;c;aGk=\u009cc", "abc"],
    ["a reset, a charset switch and a C1 CSI", "a\x1bcb\x1b(Bc\u009b2Jd", "abcd"],
    ["CRLF and a lone CR are newlines", "one\r\ntwo\rthree", "one\ntwo\nthree"],
    ["an unfinished OSC loses its ESC", "x\x1b]52;c;aGk=", "x52;c;aGk="],
    ["a BEL and a lone ESC are escaped", "bell\x07 end\x1b", "bell\\x07 end\\x1b"],
    ["a bidi override is escaped", "if (a\u202e) {", "if (a\\u202e) {"],
  ])("terminal output: %s", (_, input, want) => {
    expect(plain(input)).toBe(want);
  });
});
