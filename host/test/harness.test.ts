// The harness mappers, table-tested over streams recorded from the real agent
// CLIs (tests/fixtures/agents, see record.ts there) and over broken input.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { checkEvent } from "@hutch/shared";
import { HARNESSES, harness, type MappedEvent } from "../src/harness/index.ts";
import { installedVersion, installDirName } from "../src/harness/install.ts";
import { MAX_TOOL_OUTPUT } from "../src/harness/limits.ts";
import { claudeTranscriptMapper } from "../src/harness/claude.ts";

const FIXTURES = join(import.meta.dir, "..", "..", "tests", "fixtures", "agents");
const AGENTS_CACHE = process.env.HUTCH_AGENTS_DIR || "/var/tmp/hutch-agents";
const versions = JSON.parse(readFileSync(join(FIXTURES, "versions.json"), "utf8")) as Record<string, { package: string; version: string }>;
const recorded = (name: string) => readFileSync(join(FIXTURES, `${name}.ndjson`), "utf8").trim().split("\n");

function mapAll(name: string, lines: string[], exit = { code: 0 as number | null, signal: null as string | null }): MappedEvent[] {
  const m = harness(name).mapper();
  return [...lines.flatMap((l) => m.line(l)), ...m.end(exit)];
}

const first = (events: MappedEvent[], kind: string, pred: (d: Record<string, unknown>) => boolean = () => true) => events.findIndex((e) => e.kind === kind && pred(e.data));

describe.each(["claude", "codex", "opencode", "pi"])("%s, recorded stream", (name) => {
  const events = mapAll(name, recorded(name));

  test("every event fits the registry", () => {
    for (const e of events) expect(checkEvent(e.kind, e.data)).toBeNull();
  });

  test("busy, the tool call, its result, the final message, usage, idle, attention: in that order", () => {
    const busy = first(events, "agent.state", (d) => d.state === "busy");
    const call = first(events, "tool.called", (d) => JSON.stringify(d.input).includes("hello.txt"));
    const callId = events[call]?.data.id;
    const result = first(events, "tool.completed", (d) => d.id === callId && d.status === "ok");
    const message = first(events, "message.completed", (d) => d.role === "assistant" && String(d.text).includes('Created hello.txt containing "hi"'));
    const usage = events.findLastIndex((e) => e.kind === "usage.reported" && e.data.available === true && Number(e.data.input) > 0 && Number(e.data.output) > 0);
    const idle = first(events, "agent.state", (d) => d.state === "idle");
    const attention = first(events, "attention.required");
    const order = [busy, call, result, message, usage, idle, attention];
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(events.at(-1)!.kind).toBe("attention.required");
  });

  test("a message starts once, before its deltas, and its deltas add up to its text", () => {
    const id = events[first(events, "message.completed", (d) => d.role === "assistant")]!.data.id;
    const mine = events.filter((e) => e.data.id === id && e.kind.startsWith("message."));
    expect(mine[0]!.kind).toBe("message.started");
    expect(mine.filter((e) => e.kind === "message.started")).toHaveLength(1);
    const deltas = mine.filter((e) => e.kind === "message.delta").map((e) => e.data.text).join("");
    expect(deltas).toBe(String(mine.at(-1)!.data.text));
  });

  test("nothing in the recorded stream is unparsable", () => {
    expect(events.filter((e) => e.kind === "agent.raw" && e.data.reason !== "unknown")).toEqual([]);
  });

  test("a stream cut mid-turn and a failed exit end in error, keeping what came before", () => {
    const lines = recorded(name);
    const cut = mapAll(name, lines.slice(0, Math.floor(lines.length / 2)), { code: 1, signal: null });
    const state = cut.filter((e) => e.kind === "agent.state").at(-1)!;
    expect(state.data.state).toBe("error");
    expect(cut.some((e) => e.kind === "error.raised")).toBe(true);
    expect(cut.at(-1)!.kind).toBe("attention.required");
    expect(cut.some((e) => e.kind === "agent.state" && e.data.state === "busy")).toBe(true);
  });

  test("a record that does not parse, and one of an unknown type, become agent.raw", () => {
    const lines = recorded(name);
    const mixed = [lines[0]!, "{not json", '{"type":"from-the-future","x":1}', "[1,2]", ...lines.slice(1)];
    const out = mapAll(name, mixed);
    expect(out.filter((e) => e.kind === "agent.raw" && e.data.reason === "unparsed").map((e) => e.data.line)).toEqual(["{not json", "[1,2]"]);
    expect(out.some((e) => e.kind === "agent.raw" && e.data.reason === "unknown" && String(e.data.line).includes("from-the-future"))).toBe(true);
    // The turn still maps to the end.
    expect(out.some((e) => e.kind === "agent.state" && e.data.state === "idle")).toBe(true);
  });
});

describe("claude, recorded TUI transcript", () => {
  const m = claudeTranscriptMapper();
  const events = readFileSync(join(FIXTURES, "claude-transcript.jsonl"), "utf8").trim().split("\n").flatMap((l) => m.line(l));

  test("the typed prompt, the tool call, its result, the answer, usage, idle, attention: in order, and nothing raw", () => {
    for (const e of events) expect(checkEvent(e.kind, e.data)).toBeNull();
    const order = [
      first(events, "message.completed", (d) => d.role === "user" && d.text === "create hello.txt containing hi"),
      first(events, "tool.called", (d) => d.name === "Bash"),
      first(events, "tool.completed", (d) => d.status === "ok"),
      first(events, "message.completed", (d) => d.role === "assistant" && String(d.text).startsWith("Created hello.txt")),
      events.findLastIndex((e) => e.kind === "usage.reported"),
      first(events, "agent.state", (d) => d.state === "idle"),
      first(events, "attention.required"),
    ];
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(events.filter((e) => e.kind === "agent.raw")).toEqual([]);
  });

  test("a model call that failed for good ends the turn in error", () => {
    const failed = claudeTranscriptMapper().line(JSON.stringify({ type: "assistant", isApiErrorMessage: true, message: { id: "m1", role: "assistant", content: [{ type: "text", text: "API Error: 502" }], stop_reason: "stop_sequence", usage: { input_tokens: 0, output_tokens: 0 } } }));
    expect(failed.map((e) => e.kind)).toEqual(["agent.state", "message.started", "message.completed", "error.raised", "agent.state", "attention.required"]);
    expect(failed.at(-2)!.data.state).toBe("error");
  });
});

describe("recorded fixtures and installed CLIs", () => {
  test.each(["claude", "claude-transcript", "codex", "opencode", "pi"])("%s: the fixture was recorded from the pinned version, and the installed CLI is that version", (name) => {
    const h = HARNESSES[name.replace("-transcript", "") as "claude"];
    const rerecord = `re-record: bun tests/fixtures/agents/record.ts ${name}`;
    if (versions[name]?.version !== h.npm!.version) {
      throw new Error(`${name}: fixture recorded from ${versions[name]?.package}@${versions[name]?.version}, harness pins ${h.npm!.version}; ${rerecord}`);
    }
    const installed = installedVersion(join(AGENTS_CACHE, installDirName(h)), h.npm!);
    if (installed !== h.npm!.version) {
      throw new Error(`${name}: installed CLI in ${AGENTS_CACHE} is ${installed ?? "missing"}, fixtures are from ${h.npm!.version}; install it (bash scripts/setup-tests) and ${rerecord}`);
    }
  });
});

describe("bounds and shapes", () => {
  test("a huge tool output is cut and marked", () => {
    const m = harness("pi").mapper();
    const big = "x".repeat(MAX_TOOL_OUTPUT * 3);
    const out = m.line(JSON.stringify({ type: "tool_execution_end", toolCallId: "c1", toolName: "bash", args: {}, result: { content: [{ type: "text", text: big }] }, isError: false }));
    const done = out.find((e) => e.kind === "tool.completed")!;
    expect(String(done.data.output).length).toBe(MAX_TOOL_OUTPUT);
    expect(done.data.truncated).toBe(true);
    expect(checkEvent(done.kind, done.data)).toBeNull();
  });

  test("a failed tool is status error", () => {
    const out = harness("codex").mapper().line(JSON.stringify({ type: "item.completed", item: { id: "i1", type: "command_execution", command: "false", aggregated_output: "boom", exit_code: 1, status: "failed" } }));
    expect(out.map((e) => [e.kind, e.data.status ?? null])).toEqual([["tool.called", null], ["tool.completed", "error"]]);
  });

  test("usage that was not reported is marked unavailable", () => {
    const out = harness("shell").mapper().end({ code: 0, signal: null });
    expect(out.find((e) => e.kind === "usage.reported")!.data).toEqual({ available: false, input: null, output: null, cached: null });
  });

  test("an unknown agent is refused by name", () => {
    expect(() => harness("gpt-cli")).toThrow(/unknown agent "gpt-cli"/);
  });
});
