// The credentialed path's target as tables (route.ts): what is normalised to
// what, what is refused, and that what fetch would put on the wire is exactly
// what was checked.
import { describe, expect, test } from "bun:test";
import { HttpError } from "../src/broker/http.ts";
import { normalisePath, parseRoute, requestUrl } from "../src/broker/route.ts";

function status(f: () => unknown): number | "ok" {
  try {
    f();
    return "ok";
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    return err.status;
  }
}

describe("paths that are normalised (RFC 3986 dot segments, then merged slashes)", () => {
  test.each([
    ["/", "/"],
    ["/a/b", "/a/b"],
    ["/a/b/", "/a/b/"],
    ["/a/./b", "/a/b"],
    ["/a/b/.", "/a/b/"],
    ["/a/b/..", "/a/"],
    ["/a/b/../c", "/a/c"],
    ["/a/../../../c", "/c"],
    ["/..", "/"],
    ["/.", "/"],
    ["/anthropic/v1/../secret", "/anthropic/secret"],
    ["/anthropic/v1/./../x", "/anthropic/x"],
    ["/a//b", "/a/b"],
    ["//a", "/a"],
    ["/a//", "/a/"],
    ["//", "/"],
    ["/a/b//../c", "/a/b/c"],
    ["/a/...", "/a/..."],
    ["/a/.b/..c", "/a/.b/..c"],
    ["/v1/%41bc%20d", "/v1/%41bc%20d"],
    ["/v1/caf%C3%A9", "/v1/caf%C3%A9"],
    ["/v1/%25%32%65", "/v1/%25%32%65"],
    ["/v1/a;b", "/v1/a;b"],
  ])("%s → %s", (raw, want) => expect(normalisePath(raw)).toBe(want));
});

describe("paths that are refused with 400 (their meaning depends on the upstream's decoder)", () => {
  test.each([
    ["/anthropic/v1/%2e%2e/admin", "%2e"],
    ["/anthropic/v1/%2E%2E/admin", "%2E"],
    ["/anthropic/v1/.%2e/admin", "%2e"],
    ["/anthropic/v1/%2e/admin", "%2e"],
    ["/v1/..%2fadmin", "%2f"],
    ["/v1/%2F", "%2F"],
    ["/v1/%5c..%5cadmin", "%5c"],
    ["/v1/%5C", "%5C"],
    ["/v1/..\\admin", "backslash"],
    ["/v1\\..\\admin", "backslash"],
    ["/v1/a%00b", "%00"],
    ["/v1/a%0ab", "control"],
    ["/v1/a%7fb", "control"],
    ["/v1/%c0%ae%c0%ae/admin", "not UTF-8"],
    ["/v1/%e0%80%af", "not UTF-8"],
    ["/v1/%C3", "not UTF-8"],
    ["/v1/%", "hex digits"],
    ["/v1/%zz", "hex digits"],
    ["/v1/%2", "hex digits"],
    ["/v1/..;/admin", "parameters"],
    ["/v1/.;x/admin", "parameters"],
    ["/v1/a\0b", "0x00"],
    ["/v1/a b", "0x20"],
    ["/v1/a\tb", "0x09"],
    ["/v1/é", "0xe9"],
    ["/v1/a#frag", "fragment"],
    ["v1/a", "start with /"],
  ])("%j (%s)", (raw, why) => {
    expect(status(() => normalisePath(raw))).toBe(400);
    expect(() => normalisePath(raw)).toThrow(why);
  });
});

describe("routes: the binding is read from the normalised path; the query is kept apart and as sent", () => {
  test.each([
    ["/fake/v1/../secret", { binding: "fake", path: "/secret", query: "" }],
    ["/fake/v1/./messages", { binding: "fake", path: "/v1/messages", query: "" }],
    ["/fake//v1//messages", { binding: "fake", path: "/v1/messages", query: "" }],
    ["/fake/v1/x?/../../admin", { binding: "fake", path: "/v1/x", query: "?/../../admin" }],
    ["/fake/v1?/x", { binding: "fake", path: "/v1", query: "?/x" }],
    ["/fake/v1/x?a=%2e%2e&b=\\", { binding: "fake", path: "/v1/x", query: "?a=%2e%2e&b=\\" }],
    ["/fake?x", { binding: "fake", path: "/", query: "?x" }],
    ["/fake/../other/v1/x", { binding: "other", path: "/v1/x", query: "" }],
    ["http://127.0.0.1:3128/fake/v1/./../x", { binding: "fake", path: "/x", query: "" }],
    ["HTTP://LOCALHOST/fake/v1/a/../b", { binding: "fake", path: "/v1/b", query: "" }],
  ])("%s", (target, want) => expect(parseRoute(target)).toEqual(want));

  test.each(["/fake/v1/../../..", "/", "/..", "http://example.com/fake/v1", "http://localhost@example.com/fake/v1", "*", "fake/v1"])(
    "%s is not a route",
    (t) => expect(parseRoute(t)).toBeNull(),
  );

  test.each(["http://127.0.0.1:3128/fake/v1/%2e%2e/admin", "/fake/%2e%2e/other", "/fake/v1/x?a#b", "/fake/v1/x?a\x01", "/fake/v1\\x"])(
    "%j is refused with 400",
    (t) => expect(status(() => parseRoute(t))).toBe(400),
  );
});

describe("what fetch puts on the wire must be what was checked", () => {
  const origin = "https://localhost:8443";
  test.each(["/v1/x", "/v1/x?", "/v1/x?/../a", "/v1/a|b", "/v1/[a]", "/v1/~!$&()*+,=:@", "/v1/x?a%zz", "/v1/%41"])(
    "%s goes out as it is",
    (p) => {
      expect(requestUrl(origin, p)).toBe(origin + p);
    },
  );
  test.each(['/v1/a"b', "/v1/{x}", "/v1/a`b", "/v1/a^b", "/v1/x?q='", "/v1/x?<a>"])("%s would be rewritten by the URL parser: 400", (p) => {
    expect(status(() => requestUrl(origin, p))).toBe(400);
    expect(() => requestUrl(origin, p)).toThrow("would go out as");
  });
  test("the default port and an IPv6 address keep the path exact", () => {
    expect(requestUrl("https://localhost:443", "/v1/x")).toBe("https://localhost/v1/x");
    expect(requestUrl("https://[::1]:8443", "/v1/x?y")).toBe("https://[::1]:8443/v1/x?y");
  });
});
