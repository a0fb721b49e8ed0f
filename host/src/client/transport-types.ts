// What a client reaches a daemon through (./transport.ts turns a target into
// one): the shapes alone, so the local socket's transport (./local-transport.ts)
// and the remote one share them without importing each other.
/** One server of a remote: its URL and its pinned certificate. */
export interface RemoteServerTarget {
  url: string;
  cert: string;
  fingerprint: string;
}

export type DaemonTarget =
  | { kind: "local"; socket: string }
  | {
      kind: "remote";
      name: string;
      /** Its servers; `first` (default 0) is tried first, then the ones after it. */
      servers: RemoteServerTarget[];
      first?: number;
      token: string;
      /** Told the URL of a server that answered when the one tried first did not (the remotes file keeps it). */
      answered?: (url: string) => void;
    };

export interface Transport {
  readonly target: DaemonTarget;
  /** The daemon's address for people and logs: the socket path, or the URL of the remote's server in use. */
  readonly where: string;
  /**
   * An HTTP request to a daemon path (`/v1/...`); throws when the daemon cannot be reached.
   * `answerWithinMs`: a server that has not answered by then counts as unreachable (a read then tries the next).
   */
  fetch(path: string, init?: RequestInit, opts?: { answerWithinMs?: number }): Promise<Response>;
  /** A WebSocket to a daemon path, naming the client with `headers`. */
  websocket(path: string, headers: Record<string, string>): WebSocket;
}
