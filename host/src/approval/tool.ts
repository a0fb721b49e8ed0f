// The agent's own permission prompt as an approval source (`hutch run
// --permissions ask`): Claude Code asks its MCP server's permission prompt
// tool before a tool call its check holds; the guest passes the ask here and
// a person answers in hutch approvals. What the person judges is the tool and
// its input, all of it: a shell command longer than a summary shows is
// refused rather than cut (a tail nobody saw would run), other input is shown
// cut with its size; the digest binds the decision to the exact input.
import { APPROVAL_SUMMARY_MAX } from "@hutch/shared";
import { digestOf } from "./digest.ts";
import type { ApprovalAsk, ApprovalService } from "./service.ts";

/** Shell tools whose `command` is what runs (Claude Code's Bash). */
const SHELL_TOOLS = new Set(["Bash", "bash", "shell"]);
const PREFIX = "the agent wants to use ";

/** The ask for a tool call, or why it cannot be put to a person. */
export function toolAsk(boxId: string, tool: string, input: unknown): ApprovalAsk | { refused: string } {
  const json = JSON.stringify(input ?? {});
  const command = (input as { command?: unknown } | null)?.command;
  let summary: string;
  if (SHELL_TOOLS.has(tool) && typeof command === "string") {
    summary = `${PREFIX}${tool} to run: ${command}`;
    if (summary.length > APPROVAL_SUMMARY_MAX)
      return {
        refused: `this ${tool} command is ${command.length} characters, more than a person is shown; split it into shorter commands`,
      };
  } else {
    const shown = `${PREFIX}${tool} with ${json}`;
    summary =
      shown.length > APPROVAL_SUMMARY_MAX ? `${shown.slice(0, APPROVAL_SUMMARY_MAX - 40)}… (${json.length} bytes of input in all)` : shown;
  }
  return { kind: "tool", boxId, summary, digest: digestOf(["tool", tool, json]), target: tool.slice(0, 300) };
}

/** Asks a person about a tool call (the round every source takes) and answers as the agent's prompt wants it. */
export async function askTool(
  approvals: ApprovalService,
  boxId: string,
  tool: string,
  input: unknown,
): Promise<{ allow: boolean; message: string }> {
  const ask = toolAsk(boxId, tool, input);
  if ("refused" in ask) return { allow: false, message: ask.refused };
  const v = await approvals.round(ask);
  return v?.allow ? { allow: true, message: "" } : { allow: false, message: v?.message ?? "not approved" };
}
