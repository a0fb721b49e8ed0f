// The harness mappers, table-tested over streams recorded from the real agent
// CLIs (tests/fixtures/agents, see record.ts there) and over broken input.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { checkEvent, Events, read, type EventDef, type Static } from "@hutch/shared";
import { HARNESSES, harness, type MappedEvent } from "../src/harness/index.ts";
import { installedVersion, installDirName } from "../src/harness/install.ts";
import { MAX_TOOL_OUTPUT } from "../src/harness/limits.ts";
import { claudeTranscriptMapper } from "../src/harness/claude.ts";

const FIXTURES = join(import.meta.dir, "..", "..", "tests", "fixtures", "agents");
const AGENTS_CACHE = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const versions = JSON.parse(readFileSync(join(FIXTURES, "versions.json"), "utf8")) as Record<string, { package: string; version: string }>;
const recorded = (name: string) =>
  readFileSync(join(FIXTURES, `${name}.ndjson`), "utf8")
    .trim()
    .split("\n");

function mapAll(name: string, lines: string[], exit = { code: 0 as number | null, signal: null as string | null }): MappedEvent[] {
  const m = harness(name).mapper();
  return [...lines.flatMap((l) => m.line(l)), ...m.end(exit)];
}

/** The index of the first event of def's kind whose (checked) data passes pred. */
const first = <D extends EventDef>(events: MappedEvent[], def: D, pred: (d: Static<D["data"]>) => boolean = () => true) =>
  events.findIndex((e) => {
    const d = read(e, def);
    return d !== null && pred(d);
  });
/** The data of every event of def's kind, in order. */
const all = <D extends EventDef>(events: MappedEvent[], def: D): Static<D["data"]>[] => events.flatMap((e) => read(e, def) ?? []);

describe.each(["claude", "codex", "opencode", "pi"])("%s, recorded stream", (name) => {
  const events = mapAll(name, recorded(name));

  test("every event fits the registry", () => {
    for (const e of events) expect(checkEvent(e.kind, e.data)).toBeNull();
  });

  test("busy, the tool call, its result, the final message, usage, idle, attention: in that order", () => {
    const busy = first(events, Events.agentState, (d) => d.state === "busy");
    const call = first(events, Events.toolCalled, (d) => JSON.stringify(d.input).includes("hello.txt"));
    const callId = read(events[call]!, Events.toolCalled)?.id;
    const result = first(events, Events.toolCompleted, (d) => d.id === callId && d.status === "ok");
    const message = first(
      events,
      Events.messageCompleted,
      (d) => d.role === "assistant" && d.text.includes('Created hello.txt containing "hi"'),
    );
    const usage = events.findLastIndex((e) => {
      const d = read(e, Events.usageReported);
      return d?.available === true && Number(d.input) > 0 && Number(d.output) > 0;
    });
    const idle = first(events, Events.agentState, (d) => d.state === "idle");
    const attention = first(events, Events.attentionRequired);
    const order = [busy, call, result, message, usage, idle, attention];
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(events.at(-1)!.kind).toBe("attention.required");
  });

  test("a message starts once, before its deltas, and its deltas add up to its text", () => {
    const id = read(events[first(events, Events.messageCompleted, (d) => d.role === "assistant")]!, Events.messageCompleted)!.id;
    const mine = events.filter(
      (e) => (e.kind === "message.started" || e.kind === "message.delta" || e.kind === "message.completed") && e.data.id === id,
    );
    expect(mine[0]!.kind).toBe("message.started");
    expect(all(mine, Events.messageStarted)).toHaveLength(1);
    const deltas = all(mine, Events.messageDelta)
      .map((d) => d.text)
      .join("");
    expect(deltas).toBe(all(mine, Events.messageCompleted).at(-1)!.text);
  });

  test("nothing in the recorded stream is unparsable", () => {
    expect(all(events, Events.agentRaw).filter((d) => d.reason !== "unknown")).toEqual([]);
  });

  test("a stream cut mid-turn and a failed exit end in error, keeping what came before", () => {
    const lines = recorded(name);
    const cut = mapAll(name, lines.slice(0, Math.floor(lines.length / 2)), { code: 1, signal: null });
    expect(all(cut, Events.agentState).at(-1)!.state).toBe("error");
    expect(all(cut, Events.errorRaised).length).toBeGreaterThan(0);
    expect(cut.at(-1)!.kind).toBe("attention.required");
    expect(all(cut, Events.agentState).some((d) => d.state === "busy")).toBe(true);
  });

  test("a record that does not parse, and one of an unknown type, become agent.raw", () => {
    const lines = recorded(name);
    const mixed = [lines[0]!, "{not json", '{"type":"from-the-future","x":1}', "[1,2]", ...lines.slice(1)];
    const out = mapAll(name, mixed);
    const raws = all(out, Events.agentRaw);
    expect(raws.filter((d) => d.reason === "unparsed").map((d) => d.line)).toEqual(["{not json", "[1,2]"]);
    expect(raws.some((d) => d.reason === "unknown" && d.line.includes("from-the-future"))).toBe(true);
    // The turn still maps to the end.
    expect(all(out, Events.agentState).some((d) => d.state === "idle")).toBe(true);
  });
});

describe("claude, recorded TUI transcript", () => {
  const m = claudeTranscriptMapper();
  const events = readFileSync(join(FIXTURES, "claude-transcript.jsonl"), "utf8")
    .trim()
    .split("\n")
    .flatMap((l) => m.line(l));

  test("the typed prompt, the tool call, its result, the answer, usage, idle, attention: in order, and nothing raw", () => {
    for (const e of events) expect(checkEvent(e.kind, e.data)).toBeNull();
    const order = [
      first(events, Events.messageCompleted, (d) => d.role === "user" && d.text === "create hello.txt containing hi"),
      first(events, Events.toolCalled, (d) => d.name === "Bash"),
      first(events, Events.toolCompleted, (d) => d.status === "ok"),
      first(events, Events.messageCompleted, (d) => d.role === "assistant" && d.text.startsWith("Created hello.txt")),
      events.findLastIndex((e) => e.kind === "usage.reported"),
      first(events, Events.agentState, (d) => d.state === "idle"),
      first(events, Events.attentionRequired),
    ];
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(events.filter((e) => e.kind === "agent.raw")).toEqual([]);
  });

  test("a model call that failed for good ends the turn in error", () => {
    const failed = claudeTranscriptMapper().line(
      JSON.stringify({
        type: "assistant",
        isApiErrorMessage: true,
        message: {
          id: "m1",
          role: "assistant",
          content: [{ type: "text", text: "API Error: 502" }],
          stop_reason: "stop_sequence",
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      }),
    );
    expect(failed.map((e) => e.kind)).toEqual([
      "agent.state",
      "message.started",
      "message.completed",
      "error.raised",
      "agent.state",
      "attention.required",
    ]);
    expect(read(failed.at(-2)!, Events.agentState)?.state).toBe("error");
  });
});

describe("recorded fixtures and installed CLIs", () => {
  test.each(["claude", "claude-transcript", "codex", "opencode", "pi"])(
    "%s: the fixture was recorded from the pinned version, and the installed CLI is that version",
    (name) => {
      const h = HARNESSES[name.replace("-transcript", "") as "claude"];
      const rerecord = `re-record: bun tests/fixtures/agents/record.ts ${name}`;
      if (versions[name]?.version !== h.npm!.version) {
        throw new Error(
          `${name}: fixture recorded from ${versions[name]?.package}@${versions[name]?.version}, harness pins ${h.npm!.version}; ${rerecord}`,
        );
      }
      const installed = installedVersion(join(AGENTS_CACHE, installDirName(h)), h.npm!);
      if (installed !== h.npm!.version) {
        throw new Error(
          `${name}: installed CLI in ${AGENTS_CACHE} is ${installed ?? "missing"}, fixtures are from ${h.npm!.version}; install it (bash scripts/setup-tests) and ${rerecord}`,
        );
      }
    },
  );
});

describe("bounds and shapes", () => {
  test("a huge tool output is cut and marked", () => {
    const m = harness("pi").mapper();
    const big = "x".repeat(MAX_TOOL_OUTPUT * 3);
    const out = m.line(
      JSON.stringify({
        type: "tool_execution_end",
        toolCallId: "c1",
        toolName: "bash",
        args: {},
        result: { content: [{ type: "text", text: big }] },
        isError: false,
      }),
    );
    const done = out.find((e) => e.kind === "tool.completed")!;
    expect(checkEvent(done.kind, done.data)).toBeNull();
    expect(read(done, Events.toolCompleted)?.output.length).toBe(MAX_TOOL_OUTPUT);
    expect(read(done, Events.toolCompleted)?.truncated).toBe(true);
  });

  test("a failed tool is status error", () => {
    const out = harness("codex")
      .mapper()
      .line(
        JSON.stringify({
          type: "item.completed",
          item: { id: "i1", type: "command_execution", command: "false", aggregated_output: "boom", exit_code: 1, status: "failed" },
        }),
      );
    expect(out.map((e) => [e.kind, read(e, Events.toolCompleted)?.status ?? null])).toEqual([
      ["tool.called", null],
      ["tool.completed", "error"],
    ]);
  });

  test("usage that was not reported is marked unavailable", () => {
    const out = harness("shell").mapper().end({ code: 0, signal: null });
    expect(out.find((e) => e.kind === "usage.reported")!.data).toEqual({ available: false, input: null, output: null, cached: null });
  });

  test("an unknown agent is refused by name", () => {
    expect(() => harness("gpt-cli")).toThrow(/unknown agent "gpt-cli"/);
  });
});
