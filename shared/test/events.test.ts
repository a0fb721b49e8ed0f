// The registry's typed helpers: emit types data by its kind at compile time
// (the @ts-expect-error lines fail `bun run typecheck` if a wrong shape is
// accepted), read and isEvent check data coming back from the log at run time.
import { describe, expect, test } from "bun:test";
import { checkEvent, emit, Events, isEvent, read, type TypedEvent } from "../src/events.ts";
import { checkFixture, fixtureEvent, fixtureLog } from "../../tests/fixtures/events.ts";

describe("emit", () => {
  test("builds the event of a kind with its data", () => {
    expect(emit(Events.egressAllowed, { box: "box_1", host: "api.example", port: 443, bytesUp: 10, bytesDown: 20, ms: 3 })).toEqual({
      kind: "egress.allowed",
      data: { box: "box_1", host: "api.example", port: 443, bytesUp: 10, bytesDown: 20, ms: 3 },
    });
  });

  test("data of another shape is a type error", () => {
    // @ts-expect-error egress data has bytesUp/bytesDown, not bytes
    emit(Events.egressAllowed, { box: "b", host: "h", port: 1, bytes: 1, ms: 0 });
    // @ts-expect-error message.started has no text
    emit(Events.messageStarted, { id: "m1", role: "assistant", text: "hi" });
    // @ts-expect-error agent.state has no "waiting"
    emit(Events.agentState, { state: "waiting" });
    // @ts-expect-error a kind's data is typed wherever an event is written, not only through emit
    const bad: TypedEvent = { kind: "egress.allowed", data: { bytes: 1 } };
    expect(bad.kind).toBe("egress.allowed");
  });
});

describe("read", () => {
  const ev = (kind: string, data: unknown) => ({ kind, data });
  test("gives the data of its kind when it fits", () => {
    const d = read(ev("agent.state", { state: "needs-input" }), Events.agentState);
    expect(d?.state).toBe("needs-input");
  });
  test("null for another kind, or for data that does not fit its schema", () => {
    expect(read(ev("agent.raw", { state: "idle" }), Events.agentState)).toBeNull();
    expect(read(ev("agent.state", { state: "waiting" }), Events.agentState)).toBeNull();
    expect(read(ev("egress.allowed", { host: "h", port: 443, bytes: 12 }), Events.egressAllowed)).toBeNull();
  });
});

describe("isEvent", () => {
  test("narrows data by kind", () => {
    const e: { seq: number; kind: string; data: unknown } = {
      seq: 4,
      kind: "tool.completed",
      data: { id: "t1", output: "ok", status: "ok" },
    };
    expect(isEvent(e)).toBe(true);
    if (!isEvent(e) || e.kind !== "tool.completed") throw new Error("unreachable");
    const status: "ok" | "error" = e.data.status;
    expect([e.seq, status]).toEqual([4, "ok"]);
  });
  test("refuses unknown kinds, off-schema data, and daemon kinds from clients", () => {
    expect(isEvent({ kind: "made.up", data: {} })).toBe(false);
    expect(isEvent({ kind: "exec.started", data: {} })).toBe(false);
    expect(isEvent({ kind: "box.state.changed", data: { box: "b", state: "running" } }, "client")).toBe(false);
    expect(checkEvent("exec.started", {})).toBe("data.argv: Expected required property");
  });
});

describe("test fixtures go through the registry's checker", () => {
  test("an off-schema fixture fails where it is built, naming the field", () => {
    // `as never` gets it past the compiler, as a fixture written with a cast or parsed from JSON would.
    expect(() => fixtureEvent(Events.execStarted, {} as never)).toThrow(
      "fixture event exec.started does not fit the registry: data.argv: Expected required property",
    );
    // Types alone cannot say this: a name the schema bounds to 256 characters.
    expect(() => fixtureEvent(Events.checkpointCreated, { name: "x".repeat(257) })).toThrow(/checkpoint\.created .*data\.name/);
    expect(() => fixtureLog()(Events.attentionRequired, {} as never)).toThrow(/attention\.required .*data\.reason/);
    expect(() => checkFixture({ kind: "agent.state", data: { state: "waiting" } })).toThrow(/agent\.state .*data\.state/);
  });

  test("a fixture that fits is the event the daemon would log", () => {
    const ev = fixtureLog("ses_f");
    expect([ev(Events.inputSent, { text: "a" }), ev(Events.inputSent, { text: "b" })]).toMatchObject([
      { session: "ses_f", seq: 1, actor: { kind: "user", id: "alice" }, kind: "input.sent", data: { text: "a" } },
      { seq: 2, data: { text: "b" } },
    ]);
  });
});
