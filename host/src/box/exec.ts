// Running something in a box over its channel: the one way the daemon does
// it (probes, config files and agents in the harness, the recorder's
// terminals), on the stream lifecycle in shared/src/protocol/follow.ts.
import type { FollowIo, StreamEnd, ToolOpen, MuxStream } from "@hutch/shared";
import { follow } from "@hutch/shared";
import type { Channel } from "../engine/channel.ts";

/** Opens the tool on the box's channel and follows it; the stream is the caller's to write to or close. */
export function execIn(channel: Channel, call: ToolOpen, io: FollowIo = {}): { stream: MuxStream; done: Promise<StreamEnd> } {
  const stream = channel.mux.open(call);
  return { stream, done: follow(stream, io) };
}

/** Runs a command to completion with optional stdin: its exit code and output as text. */
export async function execCollect(
  channel: Channel,
  argv: string[],
  stdin?: string,
): Promise<{ code: number | null; stdout: string; stderr: string; error?: string }> {
  const out = [new TextDecoder(), new TextDecoder()];
  const text = ["", ""];
  const end = await execIn(
    channel,
    { tool: "exec", argv },
    {
      ...(stdin ? { stdin } : {}),
      onData: (chan, bytes) => {
        const i = chan === 1 ? 0 : 1;
        text[i] += out[i]!.decode(bytes, { stream: true });
      },
    },
  ).done;
  return { code: end.exit?.code ?? null, stdout: text[0]!, stderr: text[1]!, ...(end.error ? { error: end.error.message } : {}) };
}
