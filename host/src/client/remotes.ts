// The remotes a client keeps (`hutch remote`), in one 0600 file beside the
// user's other configuration, as gh keeps hosts.yml and incus its config.yml.
// Joining pins the server's certificate: the client fetches it over a TLS
// connection that sends nothing, checks its SHA-256 against the fingerprint in
// the join string, and from then on trusts that certificate alone.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { decodeJoin, JoinToken, type RemoteEntry, RemotesFile } from "@hutch/shared/remote";
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
    throw new HutchError("conflict", `remote "${name}" exists`, `replace it: hutch remote add ${name} --force`);
  const got = await fetchCertificate(join.url);
  if (got.fingerprint !== join.fingerprint) throw mismatch(name, join.url, join.fingerprint, got.fingerprint);
  const entry: RemoteEntry = {
    url: join.url,
    fingerprint: join.fingerprint,
    cert: got.pem,
    user: join.user,
    token: join.token,
    addedAt: new Date().toISOString(),
  };
  f.remotes[name] = entry;
  writeRemotes(f);
  return entry;
}

/** Re-pins a remote to the certificate it presents now, which must have the fingerprint the admin gave. */
export async function repin(name: string, fingerprint: string): Promise<RemoteEntry> {
  const f = readRemotes();
  const r = f.remotes[name];
  if (!r) throw new HutchError("not_found", `no remote "${name}"`, "list them: hutch remote list");
  const want = fingerprint.replaceAll(":", "").toLowerCase();
  const got = await fetchCertificate(r.url);
  if (got.fingerprint !== want) throw mismatch(name, r.url, want, got.fingerprint);
  f.remotes[name] = { ...r, fingerprint: want, cert: got.pem };
  writeRemotes(f);
  return f.remotes[name]!;
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
  return r ? transport({ kind: "remote", name: r.name, ...r.entry }) : null;
}
