// Every file name hutch keeps under $HUTCH_HOME (listed in host/README.md).
export const HOME_FILES = {
  db: "hutch.db",
  socket: "hutch.sock",
  lock: "daemon.lock",
  log: "daemon.log",
  boxes: "boxes",
  guest: "guest",
  images: "images",
} as const;
