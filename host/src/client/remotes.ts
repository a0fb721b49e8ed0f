// The remotes a client keeps (`hutch remote`), in one 0600 file beside the
// user's other configuration, as gh keeps hosts.yml and incus its config.yml.
// Joining pins the server's certificate: the client fetches it over a TLS
// connection that sends nothing, checks its SHA-256 against the fingerprint in
// the join string, and from then on trusts that certificate alone.
//
// A remote may list several servers of one fleet (`hutch remote add-server`):
// each pinned the same way, all with the remote's one token (a fleet's users
// and tokens are the same on every server). The server that answered last is
// kept as the remote's `active` one and tried first by the next verb.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import {
  AUTH_HEADER,
  decodeJoin,
  JoinToken,
  REMOTE_SERVERS_MAX,
  type RemoteEntry,
  type RemoteServer,
  RemotesFile,
  upgradeRemoteEntry,
  WhoAmI,
} from "@hutch/shared/remote";
import { check, firstError } from "@hutch/shared/validate";
import { HutchError } from "@hutch/shared/errors";
import { env } from "../env.ts";
import { fetchCertificate, mismatch } from "./cert.ts";
import { homeDaemonOnly, LOCAL, remotesPath } from "./remote-choice.ts";
import { transport, type Transport } from "./transport.ts";

export { LOCAL, remotesPath };

export function readRemotes(): RemotesFile {
  const path = remotesPath();
  if (!existsSync(path)) return { remotes: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new HutchError("config", `${path}: not JSON (${(err as Error).message})`, `fix or remove it: rm ${path}`);
  }
  // A file from before remotes listed several servers: each remote is one of a single server.
  if (typeof parsed === "object" && parsed !== null && typeof (parsed as RemotesFile).remotes === "object") {
    const f = parsed as { remotes: Record<string, unknown> };
    if (f.remotes !== null) for (const [k, v] of Object.entries(f.remotes)) f.remotes[k] = upgradeRemoteEntry(v);
  }
  if (!check(RemotesFile, parsed))
    throw new HutchError("config", `${path}: ${firstError(RemotesFile, parsed)}`, `fix or remove it: rm ${path}`);
  return parsed;
}

export function writeRemotes(f: RemotesFile): void {
  const dir = env.configDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = remotesPath();
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(f, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

/** The join string's contents, or an invalid error that says what is wrong with it. */
export function parseJoin(s: string): JoinToken {
  const decoded = decodeJoin(s);
  if (decoded === null)
    throw new HutchError(
      "invalid",
      "join string: not a hutch join string (base64url JSON)",
      "copy it whole from: hutch token create --user NAME",
    );
  if (!check(JoinToken, decoded))
    throw new HutchError("invalid", `join string: ${firstError(JoinToken, decoded)}`, "ask for a new one: hutch token create --user NAME");
  return decoded;
}

/** Joins a server: pins its certificate if it matches the join string's fingerprint, then keeps the remote. */
export async function addRemote(name: string, join: JoinToken, opts: { force?: boolean } = {}): Promise<RemoteEntry> {
  if (name === LOCAL) throw new HutchError("invalid", `"${LOCAL}" names the home's own daemon`, "pick another name");
  const f = readRemotes();
  if (f.remotes[name] && !opts.force)
    throw new HutchError(
      "conflict",
      `remote "${name}" exists`,
      `replace it: hutch remote add ${name} --force; or, for another server of its fleet: hutch remote add-server ${name} JOIN`,
    );
  const server = await pinned(name, join);
  const entry: RemoteEntry = { servers: [server], user: join.user, token: join.token, addedAt: server.addedAt };
  f.remotes[name] = entry;
  writeRemotes(f);
  return entry;
}

/** The server a join string names, its certificate fetched and checked against the string's fingerprint. */
async function pinned(name: string, join: JoinToken): Promise<RemoteServer> {
  const got = await fetchCertificate(join.url);
  if (got.fingerprint !== join.fingerprint) throw mismatch(name, join.url, join.fingerprint, got.fingerprint);
  return { url: join.url, fingerprint: join.fingerprint, cert: got.pem, addedAt: new Date().toISOString() };
}

function existing(f: RemotesFile, name: string): RemoteEntry {
  const r = f.remotes[name];
  if (!r) throw new HutchError("not_found", `no remote "${name}"`, "list them: hutch remote list");
  return r;
}

/**
 * Adds another server of the remote's fleet, from a join string made by that
 * server (`hutch token create` there): its certificate is pinned as the
 * string says, and it must take the remote's own token as the remote's user,
 * which only a server of the same fleet does. The remote keeps its one token;
 * the join string's token is not stored.
 */
export async function addServer(name: string, join: JoinToken): Promise<{ entry: RemoteEntry; server: RemoteServer; extraToken: boolean }> {
  const r = existing(readRemotes(), name);
  if (join.user !== r.user)
    throw new HutchError(
      "invalid",
      `the join string is for user ${join.user}; remote "${name}" is ${r.user}'s`,
      `ask for a join string for ${r.user} from that server: hutch token create --user ${r.user}`,
    );
  if (r.servers.some((s) => s.url === join.url))
    throw new HutchError("conflict", `remote "${name}" already lists ${join.url}`, `see its servers: hutch remote list`);
  if (r.servers.length >= REMOTE_SERVERS_MAX)
    throw new HutchError(
      "invalid",
      `remote "${name}" lists ${r.servers.length} servers, the most one remote holds`,
      `remove one first: hutch remote rm-server ${name} URL`,
    );
  const server = await pinned(name, join);
  await sameFleet(name, r, server);
  // Read again: the checks above took a while, and the file is written whole.
  const f = readRemotes();
  const now = existing(f, name);
  if (now.servers.some((s) => s.url === join.url))
    throw new HutchError("conflict", `remote "${name}" already lists ${join.url}`, `see its servers: hutch remote list`);
  now.servers.push(server);
  writeRemotes(f);
  return { entry: now, server, extraToken: join.token !== r.token };
}

/** The new server takes the remote's token as the remote's user: it shares the fleet's registry, so it is of the same fleet. */
async function sameFleet(name: string, r: RemoteEntry, server: RemoteServer): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${server.url}/v1/whoami`, {
      headers: { [AUTH_HEADER]: `Bearer ${r.token}` },
      tls: { ca: server.cert, checkServerIdentity: () => undefined },
      signal: AbortSignal.timeout(10_000),
    } as RequestInit);
  } catch (err) {
    throw new HutchError("unavailable", `${server.url}: ${(err as Error).message}`, "check the address and that hutch serve runs there");
  }
  const other = `${server.url} is not a server of remote "${name}"'s fleet: it does not take the remote's token`;
  const alone = `add it as a remote of its own: hutch remote add NAME JOIN`;
  if (res.status === 401) throw new HutchError("invalid", other, alone);
  const body: unknown = await res.json().catch(() => undefined);
  if (!res.ok) throw HutchError.fromBody(body, res.status);
  if (!check(WhoAmI, body) || body.user !== r.user) throw new HutchError("invalid", `${other} as ${r.user}`, alone);
}

/** Removes one server from a remote; the last one stays (forget the remote instead). */
export function removeServer(name: string, url: string): RemoteEntry {
  const f = readRemotes();
  const r = existing(f, name);
  const want = url.replace(/\/+$/, "");
  if (!r.servers.some((s) => s.url === want))
    throw new HutchError("not_found", `remote "${name}" lists no server ${want}`, `see its servers: hutch remote list`);
  if (r.servers.length === 1)
    throw new HutchError("invalid", `${want} is remote "${name}"'s only server`, `forget the remote instead: hutch remote rm ${name}`);
  r.servers = r.servers.filter((s) => s.url !== want);
  if (r.active === want) delete r.active;
  writeRemotes(f);
  return r;
}

/**
 * Re-pins a remote to the certificate its servers present now: each server
 * that presents the fingerprint the admin gave is pinned to it. None: the
 * error says what each presented.
 */
export async function repin(name: string, fingerprint: string): Promise<{ fingerprint: string; pinned: string[] }> {
  const want = fingerprint.replaceAll(":", "").toLowerCase();
  const r = existing(readRemotes(), name);
  const presented = await Promise.all(r.servers.map((s) => fetchCertificate(s.url).catch(() => null)));
  const matching = r.servers.flatMap((s, i) => (presented[i]?.fingerprint === want ? [{ url: s.url, pem: presented[i]!.pem }] : []));
  if (matching.length === 0) {
    if (r.servers.length === 1) {
      const got = presented[0];
      if (!got) await fetchCertificate(r.servers[0]!.url); // throws, naming why the server gave none
      throw mismatch(name, r.servers[0]!.url, want, got!.fingerprint);
    }
    const said = r.servers.map((s, i) => `${s.url}: ${presented[i]?.fingerprint ?? "no answer"}`).join("; ");
    throw new HutchError(
      "config",
      `no server of remote "${name}" presents a certificate with sha256 ${want} (${said}); nothing was pinned`,
      "check the fingerprint with the servers' admin",
    );
  }
  const f = readRemotes();
  const now = existing(f, name);
  for (const m of matching) {
    const s = now.servers.find((x) => x.url === m.url);
    if (s) Object.assign(s, { fingerprint: want, cert: m.pem });
  }
  writeRemotes(f);
  return { fingerprint: want, pinned: matching.map((m) => m.url) };
}

/** The server a remote tries first: the one that answered last, else its first. */
export function activeServer(r: RemoteEntry): number {
  return Math.max(
    0,
    r.servers.findIndex((s) => s.url === r.active),
  );
}

/** Keeps the server that answered as the remote's active one, for the next verb; a failure to write costs only that. */
function remember(name: string, url: string): void {
  try {
    const f = readRemotes();
    const r = f.remotes[name];
    if (!r || r.active === url || !r.servers.some((s) => s.url === url)) return;
    r.active = url;
    writeRemotes(f);
  } catch {
    // The verb goes on; the next one tries the old server first and moves on the same way.
  }
}

/** The remote a verb talks to: --remote / HUTCH_REMOTE, else the default; null for the home's own daemon. */
export function selectedRemote(flag?: string): { name: string; entry: RemoteEntry } | null {
  if (homeDaemonOnly(flag)) return null;
  const file = readRemotes();
  const name = flag ?? env.remote() ?? file.default;
  if (!name || name === LOCAL) return null;
  const entry = file.remotes[name];
  if (!entry)
    throw new HutchError("config", `no remote "${name}"`, `add it: hutch remote add ${name} JOIN, or list them: hutch remote list`);
  return { name, entry };
}

/** The transport to the selected remote, or null for the home's own daemon. */
export function selectedTransport(flag?: string): Transport | null {
  const r = selectedRemote(flag);
  if (!r) return null;
  const { name, entry } = r;
  return transport({
    kind: "remote",
    name,
    servers: entry.servers,
    first: activeServer(entry),
    token: entry.token,
    answered: (url) => remember(name, url),
  });
}
