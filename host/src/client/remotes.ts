// The remotes a client keeps (`hutch remote`), in one 0600 file beside the
// user's other configuration, as gh keeps hosts.yml and incus its config.yml.
// Joining pins the server's certificate: the client fetches it over a TLS
// connection that sends nothing, checks its SHA-256 against the fingerprint in
// the join string, and from then on trusts that certificate alone.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:tls";
import { X509Certificate } from "node:crypto";
import { check, decodeJoin, firstError, HutchError, JoinToken, type RemoteEntry, RemotesFile } from "@hutch/shared";
import { env } from "../env.ts";
import { transport, type Transport } from "./transport.ts";

const FILE = "remotes.json";
/** The name that always means the home's own daemon. */
export const LOCAL = "local";

export const remotesPath = () => join(env.configDir(), FILE);

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

/** The certificate a TLS server presents, fetched without sending it anything. */
export function fetchCertificate(url: string, timeoutMs = 5000): Promise<{ pem: string; fingerprint: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const host = u.hostname.replace(/^\[|\]$/g, "");
    const sock = connect({
      host,
      port: Number(u.port || 443),
      rejectUnauthorized: false,
      ...(/^[0-9.]+$|:/.test(host) ? {} : { servername: host }),
    });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(
        new HutchError("unavailable", `${url}: no TLS answer in ${timeoutMs} ms`, "check the address and that hutch serve runs there"),
      );
    }, timeoutMs);
    sock.once("secureConnect", () => {
      clearTimeout(timer);
      const raw = sock.getPeerCertificate().raw;
      sock.end();
      if (!raw) return reject(new HutchError("failed", `${url}: the server presented no certificate`, "check the address"));
      const pem = `-----BEGIN CERTIFICATE-----\n${raw
        .toString("base64")
        .replace(/(.{64})/g, "$1\n")
        .trimEnd()}\n-----END CERTIFICATE-----\n`;
      resolve({ pem, fingerprint: new X509Certificate(pem).fingerprint256.replaceAll(":", "").toLowerCase() });
    });
    sock.once("error", (err) => {
      clearTimeout(timer);
      reject(new HutchError("unavailable", `${url}: ${err.message}`, "check the address and that hutch serve runs there"));
    });
  });
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

export function mismatch(name: string, url: string, want: string, got: string): HutchError {
  return new HutchError(
    "config",
    `remote "${name}" (${url}) presented a certificate with sha256 ${got}, not the pinned ${want}; nothing was sent to it`,
    `if the server's admin confirms ${got} is its new certificate: hutch remote pin ${name} ${got}`,
    { expected: want, presented: got },
  );
}

/** The remote a verb talks to: --remote / HUTCH_REMOTE, else the default; null for the home's own daemon. */
export function selectedRemote(flag?: string): { name: string; entry: RemoteEntry } | null {
  const f = flag ?? env.remote();
  if (f === LOCAL) return null;
  if (f === undefined && !existsSync(remotesPath())) return null;
  const file = readRemotes();
  const name = f ?? file.default;
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
