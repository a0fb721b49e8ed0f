// Server mode in-process: tokens, the access gate and ownership through
// app.handle with a principal stamped as the TCP listener stamps it, over a
// real sqlite file; and the pure parts (the join string, flags, the unit).
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { check, decodeJoin, encodeJoin, JoinToken } from "@hutch/shared";
import { ask, testApp } from "./app-helpers.ts";
import { AuthService, type Principal } from "../src/auth/service.ts";
import { CreateLimiter } from "../src/auth/limit.ts";
import { parseListen } from "../src/cli/serve.ts";
import { parseDuration } from "../src/cli/token.ts";
import { parseJoin } from "../src/client/remotes.ts";
import { unitPaths, unitText, envText } from "../src/service/systemd.ts";

const FP = "ab".repeat(32);
const { home, db, app, services, close } = await testApp("hutch-auth-", {
  server: true,
  serve: () => ({ url: "https://127.0.0.1:8443", fingerprint: FP }),
});
const { auth } = services;
afterAll(close);

const as = (user: string, scopes: Principal["scopes"] = ["read", "write"]): Principal => ({
  user,
  scopes,
  remote: true,
  token: "tok_000000000000",
});

const call = (method: string, path: string, who?: Principal, body?: unknown) => ask(app, method, path, { body, who });

describe("tokens", () => {
  test("a token is shown once in its join string, stored as a hash, and authenticates its user until revoked", async () => {
    expect((await call("POST", "/v1/users", undefined, { name: "alice" })).status).toBe(201);
    const made = await call("POST", "/v1/tokens", undefined, { user: "alice" });
    expect(made.status).toBe(201);
    const joined = parseJoin(made.body.join);
    expect(joined).toMatchObject({ v: 1, url: "https://127.0.0.1:8443", fingerprint: FP, user: "alice" });
    const secret = joined.token.slice(-43);
    expect(readFileSync(join(home, "hutch.db"), "latin1").includes(secret)).toBe(false);
    const p = auth.authenticate(`Bearer ${joined.token}`);
    expect(p).toMatchObject({ user: "alice", scopes: ["read", "write"], remote: true, token: made.body.token.id });
    const heard: string[] = [];
    auth.onRevoke((id) => heard.push(id));
    expect((await call("POST", `/v1/tokens/${made.body.token.id}/revoke`)).body.revokedAt).toBeString();
    expect(heard).toEqual([made.body.token.id]);
    expect(() => auth.authenticate(`Bearer ${joined.token}`)).toThrow("was revoked");
    expect(auth.stillValid(made.body.token.id)).toBe(false);
  });

  test("a wrong secret, a malformed header or none are refused, saying why without the token", async () => {
    const { join } = await auth.createToken({ user: "alice" }, { url: "https://h:1", fingerprint: FP });
    const token = parseJoin(join).token;
    const forged = `${token.slice(0, -1)}${token.endsWith("A") ? "B" : "A"}`;
    for (const [header, why] of [
      [null, "no token"],
      ["Basic abc", "no token"],
      [`Bearer ${forged}`, "unknown token"],
      [`Bearer hutch_tok_zzzzzzzzzzzz_${"A".repeat(43)}`, "unknown token"],
    ] as const) {
      let err: Error | undefined;
      try {
        auth.authenticate(header);
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message).toContain(why);
      expect(err?.message.includes(token.slice(-43))).toBe(false);
    }
  });

  test("an expired token is refused, naming when it expired", async () => {
    // The same store on a clock the test moves: expiry is judged by the service's clock, not by waiting.
    let now = Date.parse("2026-01-01T00:00:00Z");
    const timed = new AuthService(db, auth.localUser, () => now);
    const { join, token } = await timed.createToken({ user: "alice", expiresIn: 1 }, { url: "https://h:1", fingerprint: FP });
    const header = `Bearer ${parseJoin(join).token}`;
    now += 999;
    expect(timed.authenticate(header).user).toBe("alice");
    expect(timed.stillValid(token.id)).toBe(true);
    now += 1;
    expect(() => timed.authenticate(header)).toThrow(`token ${token.id} expired at 2026-01-01T00:00:01.000Z`);
    expect(timed.stillValid(token.id)).toBe(false);
  });

  test("users and tokens are the admin's: a write token gets 403, an admin token gets through", async () => {
    expect((await call("GET", "/v1/tokens", as("alice"))).status).toBe(403);
    expect((await call("POST", "/v1/users", as("alice"), { name: "eve" })).status).toBe(403);
    expect((await call("GET", "/v1/users", as("alice", ["read", "write", "admin"]))).status).toBe(200);
  });
});

describe("who sees what", () => {
  test("a box belongs to who made it; another user gets 404 for it and does not list it", async () => {
    auth.store.addUser("bob");
    expect((await call("POST", "/v1/boxes", as("alice"), { name: "a1" })).status).toBe(201);
    expect((await call("GET", "/v1/boxes", as("alice"))).body.map((b: { name: string }) => b.name)).toEqual(["a1"]);
    expect((await call("GET", "/v1/boxes", as("bob"))).body).toEqual([]);
    for (const [method, path] of [
      ["GET", "/v1/boxes/a1"],
      ["DELETE", "/v1/boxes/a1"],
      ["GET", "/v1/boxes/a1/policy"],
      ["POST", "/v1/boxes/a1/start"],
    ] as const) {
      const r = await call(method, path, as("bob"));
      expect(r.status).toBe(404);
      expect(r.body.error.message).toBe('no box named "a1"');
    }
    // The same answer as for a box that does not exist at all.
    expect((await call("GET", "/v1/boxes/nope", as("bob"))).body.error.message).toBe('no box named "nope"');
    // The local socket sees every box.
    expect((await call("GET", "/v1/boxes")).body.map((b: { name: string }) => b.name)).toContain("a1");
  });

  test("a read share lets bob look, not act; a drive share lets him act, not delete or re-share", async () => {
    expect((await call("PUT", "/v1/boxes/a1/shares", as("bob"), { user: "bob", mode: "drive" })).status).toBe(404);
    expect((await call("PUT", "/v1/boxes/a1/shares", as("alice"), { user: "bob", mode: "read" })).status).toBe(200);
    expect((await call("GET", "/v1/boxes/a1", as("bob"))).status).toBe(200);
    expect((await call("GET", "/v1/boxes", as("bob"))).body.map((b: { name: string }) => b.name)).toEqual(["a1"]);
    expect((await call("POST", "/v1/boxes/a1/stop", as("bob"))).status).toBe(403);
    expect((await call("GET", "/v1/boxes/a1/stream", as("bob"))).status).toBe(403);
    expect((await call("PUT", "/v1/boxes/a1/shares", as("alice"), { user: "bob", mode: "drive" })).status).toBe(200);
    expect((await call("DELETE", "/v1/boxes/a1", as("bob"))).status).toBe(403);
    expect((await call("PUT", "/v1/boxes/a1/shares", as("bob"), { user: "bob", mode: "drive" })).status).toBe(403);
    expect((await call("GET", "/v1/boxes/a1/shares", as("alice"))).body).toEqual([{ box: expect.any(String), user: "bob", mode: "drive" }]);
    expect((await call("DELETE", "/v1/boxes/a1/shares/bob", as("alice"))).body.removed).toBe(true);
    expect((await call("GET", "/v1/boxes/a1", as("bob"))).status).toBe(404);
  });

  test("a read-only token may look but not write", async () => {
    expect((await call("GET", "/v1/boxes", as("alice", ["read"]))).status).toBe(200);
    const r = await call("POST", "/v1/boxes", as("alice", ["read"]), { name: "a2" });
    expect(r.status).toBe(403);
    expect(r.body.error.message).toBe("this token is read-only");
  });

  test("whoami names the token's user; the local socket is the daemon's user with every scope", async () => {
    expect((await call("GET", "/v1/whoami", as("alice"))).body).toEqual({ user: "alice", scopes: ["read", "write"], remote: true });
    expect((await call("GET", "/v1/whoami")).body).toMatchObject({ scopes: ["read", "write", "admin"], remote: false });
  });
});

describe("pure parts", () => {
  test("a join string round-trips and is checked", () => {
    const j = { v: 1 as const, url: "https://srv:8443", fingerprint: FP, user: "alice", token: `hutch_tok_abcdefghjkmn_${"x".repeat(43)}` };
    expect(check(JoinToken, decodeJoin(encodeJoin(j)))).toBe(true);
    expect(parseJoin(encodeJoin(j))).toEqual(j);
    expect(decodeJoin("not base64!")).toBeNull();
    expect(() => parseJoin(encodeJoin({ ...j, url: "http://srv" }))).toThrow("join string: url");
  });

  test.each([
    ["127.0.0.1:8443", { hostname: "127.0.0.1", port: 8443 }],
    ["[::1]:9", { hostname: "::1", port: 9 }],
    ["0.0.0.0:1", { hostname: "0.0.0.0", port: 1 }],
    ["srv.example:443", { hostname: "srv.example", port: 443 }],
  ])("--listen %s", (s, want) => expect(parseListen(s)).toEqual(want));

  test.each(["8443", "host:", "host:70000", "::1:80", ":80"])("--listen %s is refused", (s) =>
    expect(() => parseListen(s)).toThrow("expected HOST:PORT"),
  );

  test.each([
    ["30m", 1800],
    ["12h", 43_200],
    ["90d", 7_776_000],
    ["45", 45],
  ])("--expires %s", (s, n) => expect(parseDuration(s)).toBe(n));

  test("box creation is bucketed per token: a burst, then one back every 60/perMinute s", () => {
    const l = new CreateLimiter(3, 60);
    for (let i = 0; i < 3; i++) l.take("t", 0);
    expect(() => l.take("t", 0)).toThrow(expect.objectContaining({ code: "limited", status: 429, hint: "retry in 1 s" }));
    l.take("other", 0);
    l.take("t", 1000);
    expect(() => l.take("t", 1000)).toThrow();
  });

  test("the system unit: serve with doctor first, restart on failure, boxes outlive a stop; the env file holds the settings", () => {
    const paths = unitPaths("system");
    const spec = { scope: "system" as const, bin: "/usr/local/bin/hutch", home: "/root/.local/share/hutch", paths };
    const unit = unitText(spec);
    expect(paths).toEqual({ unit: "/etc/systemd/system/hutch.service", env: "/etc/hutch/hutch.env" });
    for (const line of [
      "EnvironmentFile=/etc/hutch/hutch.env",
      "ExecStart=/usr/local/bin/hutch serve --doctor $HUTCH_SERVE_ARGS",
      "Restart=on-failure",
      "KillMode=process",
      "Delegate=yes",
      "WantedBy=multi-user.target",
    ])
      expect(unit.split("\n")).toContain(line);
    expect(envText(spec).split("\n")).toContain("HUTCH_SERVE_ARGS=--listen 0.0.0.0:8443");
    expect(envText(spec).split("\n")).toContain("HUTCH_HOME=/root/.local/share/hutch");
    const user = unitText({ scope: "user", bin: "/h", home: "/home/a/.local/share/hutch", paths: unitPaths("user", "/home/a/.config") });
    expect(user).toContain("WantedBy=default.target");
    expect(user).toContain("EnvironmentFile=/home/a/.config/hutch/hutch.env");
    expect(user).not.toContain("Delegate=yes");
  });
});
