// A channel carries host connections to the guest: a unix socket (process
// engine) or a virtio-serial port (QEMU engine). Each connection gets its own
// Connection (hello, Mux, tools); the channel only moves bytes.
import type { ToolContext } from "../tools/context.ts";

export interface Channel {
  /** For the log: where the host connects. */
  readonly where: string;
  /** Takes no new connections; open ones keep going so the host sees its processes exit. */
  stop(): void;
  /** After shutdown: removes what the channel left behind. */
  close(): Promise<void>;
}

export type Shutdown = (graceMs: number, why: string) => void;

export interface ChannelDeps {
  ctx: ToolContext;
  shutdown: Shutdown;
}
