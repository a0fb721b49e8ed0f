// A server's certificate as a client sees it: fetched without sending
// anything, and the error that says a pin no longer matches. Shared by the
// remotes file (joining, re-pinning) and the transport (explaining a failed
// handshake), so neither imports the other.
import { X509Certificate } from "node:crypto";
import { connect } from "node:tls";
import { HutchError } from "@hutch/shared/base";

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

export function mismatch(name: string, url: string, want: string, got: string): HutchError {
  return new HutchError(
    "config",
    `remote "${name}" (${url}) presented a certificate with sha256 ${got}, not the pinned ${want}; nothing was sent to it`,
    `if the server's admin confirms ${got} is its new certificate: hutch remote pin ${name} ${got}`,
    { expected: want, presented: got },
  );
}
