// The bounded line splitter the runner reads agent output with, the CLI's
// transcript rendering, and the hint for a missing agent CLI by engine
// capability, as tables (turn tracking: shared/test/fold.test.ts).
import { describe, expect, test } from "bun:test";
import { Events } from "@hutch/shared";
import { LineSplitter } from "../src/harness/lines.ts";
import { renderTranscript } from "../src/client/transcript.ts";
import { missingAgentHint } from "../src/harness/run.ts";
import { PROCESS_CAPABILITIES } from "../src/engine/process/index.ts";
import { QEMU_CAPABILITIES } from "../src/engine/qemu/index.ts";
import { FIXTURE_AGENT, FIXTURE_USER, fixtureLog } from "../../tests/fixtures/events.ts";

const enc = (s: string) => new TextEncoder().encode(s);

function split(chunks: Uint8Array[], max?: number): [string, boolean][] {
  const out: [string, boolean][] = [];
  const s = new LineSplitter((l, t) => out.push([l, t]), max);
  for (const c of chunks) s.push(c);
  s.end();
  return out;
}

describe("LineSplitter", () => {
  const table: [string, Uint8Array[], number | undefined, [string, boolean][]][] = [
    [
      "lines across chunks",
      [enc('{"a":'), enc('1}\n{"b"'), enc(":2}\n")],
      undefined,
      [
        ['{"a":1}', false],
        ['{"b":2}', false],
      ],
    ],
    [
      "a last line without newline",
      [enc("x\ny")],
      undefined,
      [
        ["x", false],
        ["y", false],
      ],
    ],
    [
      "CRLF and empty lines",
      [enc("a\r\n\n\nb\n")],
      undefined,
      [
        ["a", false],
        ["b", false],
      ],
    ],
    [
      "an over-long line is cut, marked, and the rest of it skipped",
      [enc("abcdefgh"), enc("ij\nok\n")],
      4,
      [
        ["abcd", true],
        ["ok", false],
      ],
    ],
    ["UTF-8 split across chunks", [new Uint8Array([0x63, 0x61, 0x66, 0xc3]), new Uint8Array([0xa9, 0x0a])], undefined, [["café", false]]],
  ];
  test.each(table)("%s", (_name, chunks, max, want) => {
    expect(split(chunks, max)).toEqual(want);
  });
});

const ev = fixtureLog("ses_x", FIXTURE_AGENT);

test("the transcript folds deltas, shows tools and usage, and says when a message never completed", () => {
  const text = renderTranscript([
    ev(Events.inputSent, { text: "create hello.txt\n" }, FIXTURE_USER),
    ev(Events.toolCalled, { id: "t1", name: "Bash", input: { command: "echo hi > hello.txt" } }),
    ev(Events.toolCompleted, { id: "t1", output: "", status: "ok" }),
    ev(Events.messageDelta, { id: "m1", text: "Cre" }),
    ev(Events.messageDelta, { id: "m1", text: "ated." }),
    ev(Events.messageCompleted, { id: "m1", role: "assistant", text: "Created." }),
    ev(Events.usageReported, { available: true, input: 10, output: 2, cached: 0 }),
    ev(Events.messageDelta, { id: "m2", text: "Half a" }),
    ev(Events.agentState, { state: "error", reason: "the agent exited with code 1 before finishing its turn" }),
  ]);
  expect(text).toBe(
    [
      "> alice: create hello.txt",
      "tool Bash [t1]",
      '  {"command":"echo hi > hello.txt"}',
      "  → ok",
      "assistant:",
      "  Created.",
      "usage: input 10, output 2, cached 0",
      "-- error: the agent exited with code 1 before finishing its turn",
      "assistant (incomplete, m2):",
      "  Half a",
      "",
    ].join("\n"),
  );
});

test("the transcript shows an event that does not fit its kind as such, instead of reading it as if it did", () => {
  // Off-schema on purpose: what a broken daemon could send, which the CLI must not trust.
  const odd = { ...ev(Events.errorRaised, { message: "x" }), data: { message: 5 } };
  expect(renderTranscript([odd])).toBe('?? (error.raised that does not fit its schema) {"message":5}\n');
});

describe("missingAgentHint: read from the engine's capability, never its name", () => {
  const restart = "it was installed after the box started; restart the box to attach it: hutch box stop web && hutch box start web";
  const install = "install it: hutch agent install claude";
  test.each([
    ["qemu (agents at boot), installed on the host since", QEMU_CAPABILITIES, true, restart],
    ["qemu (agents at boot), not installed", QEMU_CAPABILITIES, false, install],
    ["process (agents shared live), installed", PROCESS_CAPABILITIES, true, install],
    ["process (agents shared live), not installed", PROCESS_CAPABILITIES, false, install],
    ["any engine attaching at boot", { agentsAtBoot: true }, true, restart],
  ] as const)("%s", (_name, caps, installed, hint) => {
    expect(missingAgentHint("claude", "web", caps, installed)).toBe(hint);
  });
});
