/**
 * File names every engine keeps for a box (listed in host/README.md): in
 * $HUTCH_HOME/boxes/<id>/, but for the channel socket, which a process box
 * keeps in its run root (./process/disk.ts). Each engine adds its own.
 */
export const ENGINE_FILES = {
  pid: "box.pid",
  console: "console.log",
  /** The box's channel socket. */
  socket: "agent.sock",
} as const;
