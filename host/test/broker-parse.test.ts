// Pure parts of the broker, as tables: addresses, allowlists, routes, heads, bodies.
import { describe, expect, test } from "bun:test";
import { blockedReason } from "../src/broker/address.ts";
import { allowedBy, changePolicy } from "../src/broker/policy.ts";
import { parseAuthority } from "../src/broker/gate.ts";
import { parseRoute } from "../src/broker/route.ts";
import { ChunkedDecoder, HttpError, bodyFraming, parseHead } from "../src/broker/http.ts";
import { bindingEnv, PRESETS, renderCredential } from "../src/broker/bindings.ts";

describe("addresses CONNECT may not dial without a pin", () => {
  const blocked = [
    "127.0.0.1",
    "127.8.9.10",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "fc12::3",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::10.0.0.1",
    "ff02::1",
  ];
  const open = ["8.8.8.8", "203.0.113.80", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"];
  for (const ip of blocked) test(`${ip} is blocked`, () => expect(blockedReason(ip)).not.toBeNull());
  for (const ip of open) test(`${ip} is public`, () => expect(blockedReason(ip)).toBeNull());
  test("a name is not an address", () => expect(blockedReason("example.com")).toContain("not an IP"));
});

describe("allowlists", () => {
  const allow = ["registry.npmjs.org", "*.githubusercontent.com", "git.example.com:22", "[2001:db8::1]:8443"];
  const table: [string, number, ReturnType<typeof allowedBy>][] = [
    ["registry.npmjs.org", 443, "ok"],
    ["REGISTRY.npmjs.org", 443, "ok"],
    ["registry.npmjs.org", 80, "host-other-port"],
    ["raw.githubusercontent.com", 443, "ok"],
    ["githubusercontent.com", 443, null],
    ["evilgithubusercontent.com", 443, null],
    ["git.example.com", 22, "ok"],
    ["git.example.com", 443, "host-other-port"],
    ["[2001:db8::1]", 8443, "ok"],
    ["npmjs.org", 443, null],
  ];
  for (const [host, port, want] of table) test(`${host}:${port} → ${want}`, () => expect(allowedBy(allow, host, port)).toBe(want));
  test("changes add, remove and never duplicate", () => {
    expect(
      changePolicy(
        { allow: ["a.com"], bindings: ["x"] },
        { allow: ["A.com", "b.com"], deny: ["a.com"], bindings: ["y", "x"], unbind: ["x"] },
      ),
    ).toEqual({ allow: ["b.com"], bindings: ["y"] });
  });
});

describe("routes and CONNECT targets", () => {
  test.each([
    ["/anthropic/v1/messages?beta=true", { binding: "anthropic", path: "/v1/messages", query: "?beta=true" }],
    ["http://127.0.0.1:3128/openai/v1/responses", { binding: "openai", path: "/v1/responses", query: "" }],
    [
      "http://localhost/github/org/repo.git/info/refs?service=git-upload-pack",
      { binding: "github", path: "/org/repo.git/info/refs", query: "?service=git-upload-pack" },
    ],
    ["/anthropic", { binding: "anthropic", path: "/", query: "" }],
  ])("%s", (target, want) => expect(parseRoute(target)).toEqual(want));
  test.each(["http://example.com/anthropic/v1", "/", "/Upper/x", "*"])("%s is not a route", (t) => expect(parseRoute(t)).toBeNull());
  test.each([
    ["example.com:443", { host: "example.com", port: 443 }],
    ["[::1]:8443", { host: "[::1]", port: 8443 }],
  ])("%s", (t, want) => expect(parseAuthority(t)).toEqual(want));
  test.each(["example.com", "example.com:0", "example.com:70000", "exa mple.com:443", "a@b:443"])("%s is refused", (t) =>
    expect(parseAuthority(t)).toBeNull(),
  );
});

describe("request heads and bodies", () => {
  const head = (s: string) => parseHead(new TextEncoder().encode(s));
  test("a good head keeps header order and trims values", () => {
    expect(head("POST /a HTTP/1.1\r\nHost: x\r\nX-Api-Key:  k \r\n\r\n")).toEqual({
      method: "POST",
      target: "/a",
      version: "HTTP/1.1",
      headers: [
        ["Host", "x"],
        ["X-Api-Key", "k"],
      ],
    });
  });
  test.each([
    ["GET /a HTTP/2\r\n\r\n", 400],
    ["get /a HTTP/1.1\r\n\r\n", 400],
    ["GET /a HTTP/1.1\r\nno colon\r\n\r\n", 400],
    ["GET /a HTTP/1.1\r\nbad name: x\r\n\r\n", 400],
    ["GET /a HTTP/1.1\r\nx: a\0b\r\n\r\n", 400],
    [`GET /a HTTP/1.1\r\n${"x: y\r\n".repeat(200)}\r\n`, 431],
  ])("%j → %d", (text, status) => {
    try {
      head(text);
      throw new Error("parsed");
    } catch (err) {
      expect(err).toBeInstanceOf(HttpError);
      expect((err as HttpError).status).toBe(status);
    }
  });
  test("framing refuses ambiguity", () => {
    expect(bodyFraming(head("POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\n"))).toEqual({ kind: "length", length: 5 });
    expect(bodyFraming(head("POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"))).toEqual({ kind: "chunked" });
    expect(() => bodyFraming(head("POST / HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n"))).toThrow("invalid Content-Length");
    expect(() => bodyFraming(head("POST / HTTP/1.1\r\ncontent-length: -1\r\n\r\n"))).toThrow("invalid Content-Length");
    expect(() => bodyFraming(head("POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n"))).toThrow("not supported");
    expect(() => bodyFraming(head("POST / HTTP/1.1\r\ncontent-length: 999999999999\r\n\r\n"))).toThrow("over the broker's");
  });
  test("chunked bodies decode across arbitrary splits and leave what follows", () => {
    const wire = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
    for (let split = 1; split < wire.length; split += 3) {
      const d = new ChunkedDecoder();
      const enc = new TextEncoder();
      const a = d.feed(enc.encode(wire.slice(0, split)));
      const b = d.feed(enc.encode(wire.slice(split)));
      const text = [...a.body, ...b.body].map((x) => new TextDecoder().decode(x)).join("");
      expect(text).toBe("hello world");
      expect(b.done).toBe(true);
      expect(new TextDecoder().decode(d.rest())).toBe("NEXT");
    }
    expect(() => new ChunkedDecoder().feed(new TextEncoder().encode("zz\r\n"))).toThrow("malformed chunk size");
    expect(() => new ChunkedDecoder().feed(new TextEncoder().encode("2\r\nabc\r\n"))).toThrow("longer than its size");
  });
});

describe("credentials and the environment boxes get", () => {
  test("formats render a value the same way for the stub and the secret", () => {
    expect(renderCredential("{secret}", "k")).toBe("k");
    expect(renderCredential("Bearer {secret}", "k")).toBe("Bearer k");
    expect(renderCredential("Basic {basic:x-access-token}", "k")).toBe(`Basic ${btoa("x-access-token:k")}`);
  });
  test("presets point agents and git at the broker with the stub, never a secret", () => {
    expect(bindingEnv("anthropic", PRESETS.anthropic!, "http://127.0.0.1:3128", "STUB")).toEqual({
      ANTHROPIC_BASE_URL: "http://127.0.0.1:3128/anthropic",
      ANTHROPIC_API_KEY: "STUB",
    });
    expect(bindingEnv("openai", PRESETS.openai!, "http://127.0.0.1:3128", "STUB")).toEqual({
      OPENAI_BASE_URL: "http://127.0.0.1:3128/openai/v1",
      OPENAI_API_KEY: "STUB",
    });
    const git = bindingEnv("github", PRESETS.github!, "http://127.0.0.1:3128", "STUB");
    expect(git.GIT_CONFIG_KEY_0).toBe("url.http://127.0.0.1:3128/github/.insteadOf");
    expect(git.GIT_CONFIG_VALUE_1).toBe(`Authorization: Basic ${btoa("x-access-token:STUB")}`);
  });
});
