// Every file name hutch keeps under $HUTCH_HOME (listed in host/README.md).
export const HOME_FILES = {
  db: "hutch.db",
  socket: "hutch.sock",
  lock: "daemon.lock",
  log: "daemon.log",
  boxes: "boxes",
  guest: "guest",
  images: "images",
  /** The user's layer of configuration (broker bindings and pins). */
  config: "config.json",
  /** 0600 key that seals secrets at rest. */
  secretsKey: "keys/secrets.key",
  /** `hutch serve`'s generated self-signed certificate and its key (0600), kept so clients' pins hold across restarts. */
  serveCert: "keys/serve.crt",
  serveKey: "keys/serve.key",
} as const;

/** Files the daemon keeps in a box's directory ($HUTCH_HOME/boxes/<id>/) besides the engine's own. */
export const BOX_FILES = {
  /** The box's own broker listener (0600); only the daemon's relay connects to it. */
  brokerSocket: "broker.sock",
} as const;
