// A Replier that keeps what a tool handler answers instead of sending it to
// the host: the result message, the bytes it sends on chan 1 (a snapshot's
// text, a PNG), bounded, and the error it closes with. The guest's MCP server
// calls the same handlers the host's tool streams do through it.
import type { StreamError } from "@hutch/shared/wire";
import { ToolError, toStreamError, type Replier } from "../tools/base.ts";

export interface Captured {
  value: unknown;
  bytes: Uint8Array;
}

class Capture implements Replier {
  value: unknown;
  error: StreamError | undefined;
  closed = false;
  private readonly parts: Uint8Array[] = [];
  private size = 0;

  constructor(private readonly max: number) {}

  msg(m: unknown): void {
    if (typeof m === "object" && m !== null && (m as { type?: unknown }).type === "result") this.value = (m as { value: unknown }).value;
  }

  async write(_chan: number, bytes: Uint8Array): Promise<boolean> {
    if (this.closed) return false;
    this.size += bytes.length;
    if (this.size > this.max) {
      this.close({ code: "failed", message: `the answer is larger than ${this.max} bytes` });
      return false;
    }
    this.parts.push(bytes.slice());
    return true;
  }

  eof(_chan: number): void {}

  close(error?: StreamError): void {
    if (this.closed) return;
    this.closed = true;
    this.error = error;
  }

  bytes(): Uint8Array {
    return Buffer.concat(this.parts);
  }
}

/** Runs one handler against a capture; throws a ToolError with the code and message it failed with. */
export async function capture(run: (r: Replier) => Promise<void> | void, maxBytes: number): Promise<Captured> {
  const c = new Capture(maxBytes);
  try {
    await run(c);
  } catch (err) {
    const e = toStreamError(err);
    throw new ToolError(e.code as ToolError["code"], e.message);
  }
  if (c.error) throw new ToolError(c.error.code as ToolError["code"], c.error.message);
  if (!c.closed) throw new ToolError("failed", "the tool ended without an answer");
  return { value: c.value, bytes: c.bytes() };
}
