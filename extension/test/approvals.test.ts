// The approval notification as data: which verb each button runs, which watch
// lines are taken, and that what the daemon relays is shown as plain text.
import { describe, expect, test } from "bun:test";
import type { Approval } from "@hutch/shared";
import { CHOICES, decisionArgs, notificationText, watchLine } from "../src/approval-prompt.ts";

const approval: Approval = {
  id: "apr_00000000000000000001",
  kind: "credential",
  box: "box_1",
  boxName: "web",
  session: "ses_1",
  summary: 'POST /repos/o/r/issues through "github"\u001b[2J\nwith the user\'s credential',
  digest: `sha256:${"a".repeat(64)}`,
  requestedAt: "2026-12-01T10:00:00.000Z",
  expiresAt: "2026-12-01T10:10:00.000Z",
  state: "pending",
};

describe("approval notifications", () => {
  test("each button runs its verb", () => {
    expect(CHOICES.map((c) => decisionArgs(approval.id, c))).toEqual([
      ["approve", approval.id],
      ["approve", approval.id, "--always"],
      ["deny", approval.id, "--reason", "denied in VS Code"],
    ]);
  });

  test("watch lines are checked against the shared schema", () => {
    expect(watchLine(JSON.stringify({ type: "pending", approval }))).toEqual({ type: "pending", approval });
    expect(watchLine(JSON.stringify({ type: "done", id: approval.id }))).toEqual({ type: "done", id: approval.id });
    expect(watchLine(JSON.stringify({ type: "pending", approval: { ...approval, digest: "nope" } }))).toBeNull();
    expect(watchLine("INFO something")).toBeNull();
  });

  test("the summary is one line of plain text: no escape sequence, no line break", () => {
    const text = notificationText(approval);
    expect(text).toStartWith("hutch: box web asks to send: POST /repos/o/r/issues");
    expect(text).not.toContain("\u001b");
    expect(text).not.toContain("\n");
  });

  test("an agent's tool call says what the agent wants to run", () => {
    const tool: Approval = { ...approval, kind: "tool", summary: "the agent wants to use Bash to run: rm -rf data", target: "Bash" };
    expect(notificationText(tool)).toBe("hutch: box web asks: the agent wants to use Bash to run: rm -rf data");
  });
});
