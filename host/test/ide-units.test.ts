// The bridge's pure parts as tables: anchor → file URI and diagnostic (activity: fold.test.ts).
import { describe, expect, test } from "bun:test";
import type { AnchoredAnnotation } from "@hutch/shared";
import { anchorUri, annotationDiagnostic } from "../src/ide/anchors.ts";

describe("anchorUri", () => {
  const cases: [string | null, string, string | null][] = [
    ["/home/a/proj", "src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "/workspace/src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "/home/a/proj/src/a.ts", "file:///home/a/proj/src/a.ts"],
    ["/home/a/proj", "./src/../b.ts", "file:///home/a/proj/b.ts"],
    ["/home/a/proj", "../outside.ts", null],
    ["/home/a/proj", "/etc/passwd", null],
    ["/home/a/proj", "/workspacex/a.ts", null],
    [null, "src/a.ts", null],
    ["/home/a/my proj", "a b.ts", "file:///home/a/my%20proj/a%20b.ts"],
    // Anchors are another user's words: no way out of the workspace by any spelling.
    ["/home/a/proj", "/workspace/../etc/passwd", null],
    ["/home/a/proj", "src/../../x", null],
    ["/home/a/proj", "/home/a/proj/../other/x", null],
    ["/home/a/proj", "/home/a/project2/x", null],
    ["/home/a/proj", "/workspace", "file:///home/a/proj"],
  ];
  for (const [root, path, uri] of cases) test(`${root} + ${path} → ${uri}`, () => expect(anchorUri(root, { path })).toBe(uri));
});

describe("annotationDiagnostic", () => {
  const note = (path: string, line: number): AnchoredAnnotation => ({
    seq: 7,
    at: "",
    actor: { kind: "user", id: "alice" },
    text: "look",
    anchor: { path, line },
  });
  test("a line anchor becomes an information diagnostic on that line", () => {
    const d = annotationDiagnostic("/p", "ses_x", note("a.ts", 4), "review")!;
    expect(d.uri).toBe("file:///p/a.ts");
    expect(d.diagnostic.severity).toBe(3);
    expect(d.diagnostic.range.start).toEqual({ line: 3, character: 0 });
    expect(d.diagnostic.message).toBe("look (alice, review)");
    expect(d.diagnostic.code).toBe("ses_x#7");
  });
  test("the message shows control and bidi characters escaped", () => {
    const n = { ...note("a.ts", 1), text: "ok\u202e ;)\x1b]52;c;aGk=\x07", actor: { kind: "user" as const, id: "bob\x1bc" } };
    expect(annotationDiagnostic("/p", "ses_x", n, "s\n2")!.diagnostic.message).toBe(
      "ok\\u202e ;)\\x1b]52;c;aGk=\\x07 (bob\\x1bc, s\\x0a2)",
    );
  });
  test("an anchor outside the workspace, or no workspace: nothing", () => {
    expect(annotationDiagnostic("/p", "ses_x", note("/etc/passwd", 1), "s")).toBeNull();
    expect(annotationDiagnostic(null, "ses_x", note("a.ts", 1), "s")).toBeNull();
  });
});
