// `hutch serve --e2b` on loopback for the E2B API's tests, and the SDK
// program (tests/fixtures/e2b/sdk.ts) run against it as a user's program
// runs: only E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL, and the server's
// certificate trusted through NODE_EXTRA_CA_CERTS.
import { join } from "node:path";
import { expect } from "bun:test";
import { freePort, startServer, type Server } from "./remote.ts";

const SDK = join(import.meta.dir, "fixtures", "e2b", "sdk.ts");

export interface E2bServer {
  srv: Server;
  /** The E2B listener's address (both E2B_API_URL and E2B_SANDBOX_URL). */
  url: string;
  e2bPort: number;
  caPath: string;
  /** Runs one scenario of the SDK program with `key`; its JSON answer. */
  sdk(scenario: string, key: string, ...args: string[]): Promise<Record<string, unknown>>;
}

export async function startE2b(prefix = "hutch-e2b-"): Promise<E2bServer> {
  const e2bPort = freePort();
  const srv = await startServer(prefix, { args: ["--e2b", `127.0.0.1:${e2bPort}`] });
  const url = `https://127.0.0.1:${e2bPort}`;
  const caPath = join(srv.home.home, "keys", "serve.crt");
  return {
    srv,
    url,
    e2bPort,
    caPath,
    async sdk(scenario, key, ...args) {
      const proc = Bun.spawn([process.execPath, SDK, scenario, ...args], {
        env: { ...process.env, E2B_API_KEY: key, E2B_API_URL: url, E2B_SANDBOX_URL: url, NODE_EXTRA_CA_CERTS: caPath },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      expect(code, `${scenario}: ${err}`).toBe(0);
      return JSON.parse(out) as Record<string, unknown>;
    },
  };
}
