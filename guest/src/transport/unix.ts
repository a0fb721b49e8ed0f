// The process engine's channel: a unix socket the host connects to, any
// number of connections at once. The engine names it through a descriptor of
// a host directory (/proc/self/fd/N/agent.sock) that is in no mount of the
// box's, so the box's processes cannot move it or listen in its place.
import { mkdir, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { Connection } from "../connection.ts";
import type { Channel, ChannelDeps } from "./channel.ts";

export async function listenUnix(path: string, { ctx, shutdown }: ChannelDeps): Promise<Channel> {
  await mkdir(dirname(path), { recursive: true });
  // A socket file left by an earlier run would make listen fail with EADDRINUSE.
  await unlink(path).catch(() => {});
  const server = Bun.listen<Connection>({
    unix: path,
    socket: {
      open: (socket) => {
        socket.data = new Connection(socket, ctx, shutdown);
      },
      data: (socket, chunk) => socket.data.feed(chunk),
      drain: (socket) => socket.data.drain(),
      close: (socket, err) => socket.data.lost(err ? err.message : "closed by the host"),
      error: (socket, err) => socket.data.lost(err.message),
    },
  });
  return {
    where: `unix:${path}`,
    stop: () => server.stop(false),
    close: () => unlink(path).catch(() => {}),
  };
}
