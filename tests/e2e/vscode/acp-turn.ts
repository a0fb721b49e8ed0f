// An ACP editor for the conversation drive (drive-conversation.mjs): loads a
// hutch session through `hutch acp` with the ACP SDK's client, sends one
// prompt when given, and prints what it shows of the session's prompts, in
// order, with their actors: {"prompts": [[text, actorKind, actorId], ...],
// "stopReason": ...}. Run by Bun (the SDK is the host's dependency) with the
// drive's HUTCH_HOME. Usage: bun acp-turn.ts SESSION [PROMPT]
import { methods } from "@agentclientprotocol/sdk";
import { editor, hutchOf, initialize, textOf } from "../../acp-editor.ts";
import type { Home } from "../../helpers.ts";

const [session, prompt] = process.argv.slice(2);
if (!session) throw new Error("usage: bun acp-turn.ts SESSION [PROMPT]");
const e = editor({ env: process.env } as unknown as Home, "conversation-drive");
try {
  await initialize(e, "conversation-drive");
  await e.conn.agent.request(methods.agent.session.load, { sessionId: session, cwd: process.cwd(), mcpServers: [] });
  let stopReason: string | undefined;
  if (prompt)
    stopReason = (
      await e.conn.agent.request(methods.agent.session.prompt, { sessionId: session, prompt: [{ type: "text", text: prompt }] })
    ).stopReason;
  const seen = new Set<number>();
  const prompts = e.updates
    .filter((n) => n.sessionId === session && n.update.sessionUpdate === "user_message_chunk")
    .filter((n) => !seen.has(hutchOf(n.update).seq) && seen.add(hutchOf(n.update).seq))
    .map((n) => [textOf(n.update).trim(), hutchOf(n.update).actor.kind, hutchOf(n.update).actor.id]);
  console.log(JSON.stringify({ prompts, stopReason }));
} finally {
  await e.stop();
}
