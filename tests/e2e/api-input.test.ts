// Bad input against a real daemon on its unix socket: each is a 400 naming the
// field, a malformed request head is answered without waiting for more, and
// none of it leaves a stack trace in daemon.log.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { makeHome, type Home } from "../helpers.ts";

let h: Home;
let sock: string;
let SES: string;
beforeAll(async () => {
  h = makeHome();
  sock = join(h.home, "hutch.sock");
  const r = await h.run(["run", "--detach", "--label", "input"]);
  expect(r.code).toBe(0);
  SES = r.stdout.trim();
  expect((await h.run(["box", "create", "in"])).code).toBe(0);
});
afterAll(() => h.cleanup());

async function api(method: string, path: string, body?: string, contentType = "application/json") {
  const res = await fetch(`http://localhost${path}`, {
    method,
    unix: sock,
    headers: body === undefined ? {} : { "content-type": contentType },
    body,
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

/**
 * Sends raw bytes and collects the answer until the daemon closes the
 * connection. A server that waited for more of the head would never close:
 * that is reported after 5 s rather than timing the answer.
 */
function raw(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const s = connect(sock, () => s.write(bytes));
    const waited = setTimeout(() => {
      s.destroy();
      reject(
        new Error(
          `no answer and no close for ${JSON.stringify(bytes)}: the server is waiting for more of the head (got ${JSON.stringify(got)})`,
        ),
      );
    }, 5000);
    s.on("data", (d) => (got += d.toString("latin1")));
    s.on("close", () => {
      clearTimeout(waited);
      resolve(got);
    });
    s.on("error", reject);
  });
}

describe("bad input to a running daemon", () => {
  // SES stands for a real session's id (made in beforeAll, after the table is built).
  test.each([
    ["GET", "/v1/sessions/SES/events?limit=99999999999999999999", "limit: Expected a whole number from 1 to 10000", undefined],
    ["GET", "/v1/sessions/SES/events?limit=1.5", "limit: Expected a whole number from 1 to 10000", undefined],
    ["GET", "/v1/sessions/SES/events?from=1e300", "from: Expected a whole number from 1 to 9007199254740991", undefined],
    ["GET", "/v1/sessions/SES/output/0.5", "chunk: Expected a whole number from 0 to 9007199254740991", undefined],
    // Out of range but a valid number: what the compiled binary once passed on as a string.
    ["GET", "/v1/boxes/in/egress?limit=0", "limit: Expected a whole number from 1 to 1000", undefined],
    ["GET", "/v1/boxes/in/egress?limit=5000", "limit: Expected a whole number from 1 to 1000", undefined],
    ["GET", "/v1/boxes/in/egress?limit=1.5", "limit: Expected a whole number from 1 to 1000", undefined],
    [
      "POST",
      "/v1/sessions/SES/events",
      "events.0.data.0.0.0…: nested deeper than 32 levels",
      `{"events":[{"kind":"attention.required","data":${"[".repeat(100_000)}${"]".repeat(100_000)}}]}`,
    ],
    ["POST", "/v1/boxes", "0.0.0.0.0.0…: nested deeper than 32 levels", "[".repeat(1_000_000) + "]".repeat(1_000_000)],
    ["POST", "/v1/boxes", "body: expected a JSON object, got number", "1"],
    ["POST", "/v1/boxes", "cpus: Expected integer", '{"name":"ok","cpus":"2"}'],
    ["POST", "/v1/sessions/SES/driver/acquire", "leaseMs: Expected integer", '{"leaseMs":"5000"}'],
    [
      "POST",
      "/v1/sessions/SES/events",
      "events.0.data: Expected at most 262144 characters of JSON",
      JSON.stringify({ events: [{ kind: "attention.required", data: { reason: "x", extra: "y".repeat(300_000) } }] }),
    ],
  ])("%s %s is a 400: %s", async (method, path, message, body) => {
    const r = await api(method, path.replace("SES", SES), body);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "invalid", message });
  });

  test("a body over 16 MiB is refused by the server before the daemon reads it", async () => {
    const res = await fetch("http://localhost/v1/boxes", {
      method: "POST",
      unix: sock,
      headers: { "content-type": "application/json" },
      body: `{"name":"${"a".repeat(17 * 1024 * 1024)}"}`,
    });
    expect(res.status).toBe(413);
  });

  test("a subscription from past the last possible seq is refused", async () => {
    const headers = {
      upgrade: "websocket",
      connection: "upgrade",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      "sec-websocket-version": "13",
    };
    const r = await fetch(`http://localhost/v1/sessions/${SES}/subscribe?from=1e300`, { unix: sock, headers });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
      "from: Expected a whole number from 1 to 9007199254740991",
    );
  });

  test("a header line ending in a bare LF is a 400 and the connection is closed", async () => {
    expect(await raw("GET /v1/health HTTP/1.1\r\nHost: localhost\nX-A: b\r\n\r\n")).toStartWith("HTTP/1.1 400 ");
    expect(await raw("GET /v1/health HTTP/1.1\r\nHost: localhost\n\n")).toStartWith("HTTP/1.1 400 ");
  });

  test("a request line ending in a bare LF is refused at once (Bun's parser says 505) and the daemon keeps serving", async () => {
    // uWS, inside Bun, requires " HTTP/1.1\r\n" after the target and answers anything else
    // "505 HTTP Version Not Supported" before any JavaScript runs (host/README.md).
    const answer = await raw("GET /v1/health HTTP/1.1\nHost: localhost\n\n");
    expect(answer).toMatch(/^HTTP\/1\.1 (400|505) /);
    expect(answer).not.toContain('"ok":true');
    expect((await fetch("http://localhost/v1/health", { unix: sock })).status).toBe(200);
  });

  test("none of it left a stack trace or an error in daemon.log", () => {
    const logText = readFileSync(join(h.home, "daemon.log"), "utf8");
    expect(logText).toContain("daemon ready");
    const bad = logText
      .split("\n")
      .filter((l) => /^\s+at\s|^\s*\^|Maximum call stack|RangeError|TypeError|SyntaxError| ERROR | WARN /.test(l));
    expect(bad).toEqual([]);
  });
});
