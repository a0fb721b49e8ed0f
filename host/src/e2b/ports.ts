// A box's ports for `sandbox.getHost(port)`: per port, a unix socket in the
// daemon's own directory (0700, the socket 0600) whose every connection is a
// port.connect stream to the box's loopback, the tool `hutch port` forwards
// with. The listener hands each request on to that socket with fetch, so
// HTTP is spoken by the program in the box and by Bun's client, never parsed
// here. A unix socket, not a loopback port: other users of the server never
// reach a box's ports through it.
import { mkdirSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { Chan, joinSocket } from "@hutch/shared";
import type { Channel } from "../engine/channel.ts";

export class PortBridge {
  private readonly servers = new Map<number, Promise<string>>();
  private readonly live = new Set<Server>();
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly dir: string,
    private readonly channel: () => Channel,
  ) {}

  /** The unix socket that reaches `port` in the box (made on first use). */
  socket(port: number): Promise<string> {
    let made = this.servers.get(port);
    if (!made) {
      made = this.listen(port);
      this.servers.set(port, made);
      made.catch(() => this.servers.delete(port));
    }
    return made;
  }

  private listen(port: number): Promise<string> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const path = join(this.dir, `${port}.sock`);
    rmSync(path, { force: true });
    const server = createServer({ pauseOnConnect: true }, (sock) => {
      this.sockets.add(sock);
      sock.once("close", () => this.sockets.delete(sock));
      let channel: Channel;
      try {
        channel = this.channel();
      } catch {
        return void sock.destroy();
      }
      const stream = channel.mux.open({ tool: "port.connect", port });
      joinSocket(stream, sock, Chan.stdout, Chan.stdin, (h) => {
        stream.autoCredit = false;
        stream.handlers = h;
      });
    });
    this.live.add(server);
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve(path));
    });
  }

  close(): void {
    for (const s of this.sockets) s.destroy();
    for (const s of this.live) s.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
