// An editor for the `hutch acp` tests: the ACP SDK's own client side on the
// stdio of a spawned `dist/hutch acp`, as Zed or a Neovim plugin runs it.
import {
  client,
  methods,
  ndJsonStream,
  PROTOCOL_VERSION,
  type ClientConnection,
  type SessionNotification,
  type SessionUpdate,
} from "@agentclientprotocol/sdk";
import { HUTCH, type Home } from "./helpers.ts";

export interface Editor {
  conn: ClientConnection;
  updates: SessionNotification[];
  /** Every line the agent wrote on stdout, parsed (what the SDK reads too). */
  lines: { id?: unknown; error?: { code: number; message: string } }[];
  /** Writes a raw line on the agent's stdin, as a broken editor would. */
  raw(line: string): void;
  stop(): Promise<void>;
}

/** `hutch acp` spawned as an editor spawns it, with the SDK's client on its stdio. */
export function editor(h: Home, name: string, args: string[] = []): Editor {
  const proc = Bun.spawn([HUTCH, ...args, "acp", "--agent", "claude"], {
    env: h.env,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  const output = new WritableStream<Uint8Array>({
    async write(chunk) {
      proc.stdin.write(chunk);
      await proc.stdin.flush();
    },
  });
  const [forSdk, forTest] = (proc.stdout as ReadableStream<Uint8Array>).tee();
  const lines: Editor["lines"] = [];
  void (async () => {
    let buf = "";
    const dec = new TextDecoder();
    for await (const c of forTest) {
      buf += dec.decode(c, { stream: true });
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    }
  })();
  const updates: SessionNotification[] = [];
  const conn = client({ name })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .connect(ndJsonStream(output, forSdk));
  return {
    conn,
    updates,
    lines,
    raw: (line) => {
      proc.stdin.write(`${line}\n`);
      void proc.stdin.flush();
    },
    stop: async () => {
      conn.close();
      proc.kill();
      await proc.exited;
    },
  };
}

export async function initialize(e: Editor, name: string) {
  return e.conn.agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name, version: "1.0.0" },
  });
}

export type Hutch = { seq: number; actor: { kind: string; id: string } };
export const hutchOf = (u: SessionUpdate) => (u._meta as { hutch: Hutch }).hutch;
export const textOf = (u: SessionUpdate) =>
  "content" in u && !Array.isArray(u.content) && u.content?.type === "text" ? u.content.text : "";
/** What an editor shows of an update, to compare two editors' views. */
export const view = (n: SessionNotification) => ({ update: n.update.sessionUpdate, seq: hutchOf(n.update).seq, text: textOf(n.update) });
