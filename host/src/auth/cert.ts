// The certificate `hutch serve` presents. From files the admin names, or a
// self-signed one made on first start and kept in the home, so the SHA-256
// fingerprint clients pinned holds across restarts (code-server and incus do
// the same). openssl makes it: it is on every server that runs QEMU, and a
// hand-written X.509 encoder is not code this project should own.
import { X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { HutchError } from "@hutch/shared";
import { HOME_FILES } from "../paths.ts";

export interface ServeCert {
  cert: string;
  key: string;
  /** Lower-case hex SHA-256 of the certificate's DER, no colons: what a join string carries. */
  fingerprint: string;
  /** Where the certificate came from, for the log. */
  source: string;
}

/** The hex SHA-256 fingerprint of a PEM certificate (its first, for a chain). */
export function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256.replaceAll(":", "").toLowerCase();
}

/** The certificate to serve: from --cert/--key, or the home's self-signed one (made when missing). */
export async function serveCert(home: string, files: { cert?: string; key?: string }, names: string[]): Promise<ServeCert> {
  if (files.cert || files.key) {
    if (!files.cert || !files.key)
      throw new HutchError("invalid", "--cert and --key go together", "pass both, or neither for a self-signed one");
    const cert = readPem(files.cert, "--cert");
    const key = readPem(files.key, "--key");
    return { cert, key, fingerprint: fingerprintOf(cert), source: files.cert };
  }
  const certPath = join(home, HOME_FILES.serveCert);
  const keyPath = join(home, HOME_FILES.serveKey);
  if (!existsSync(certPath) || !existsSync(keyPath)) await selfSign(certPath, keyPath, names);
  const cert = readFileSync(certPath, "utf8");
  return { cert, key: readFileSync(keyPath, "utf8"), fingerprint: fingerprintOf(cert), source: certPath };
}

function readPem(path: string, flag: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new HutchError("config", `${flag} ${path}: ${(err as Error).message}`, "name a readable PEM file");
  }
}

/** A P-256 key and a ten-year self-signed certificate naming the listen address and this host. */
async function selfSign(certPath: string, keyPath: string, names: string[]): Promise<void> {
  mkdirSync(dirname(certPath), { recursive: true, mode: 0o700 });
  const san = [...new Set(["localhost", "127.0.0.1", "::1", ...names])]
    .map((n) => (/^[0-9.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`))
    .join(",");
  const proc = Bun.spawn(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "3650",
      "-subj",
      "/O=hutch/CN=hutch serve",
      "-addext",
      `subjectAltName=${san}`,
      "-keyout",
      keyPath,
      "-out",
      certPath,
    ],
    { stdout: "ignore", stderr: "pipe" },
  );
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]).catch((e: Error) => [127, e.message] as const);
  if (code !== 0) {
    throw new HutchError(
      "config",
      `could not make a self-signed certificate with openssl: ${String(err).trim()}`,
      "install openssl, or pass --cert and --key",
    );
  }
  chmodSync(keyPath, 0o600);
}
