// The bridge's pure parts as tables: anchor → file URI and diagnostic (activity: fold.test.ts).
import { describe, expect, test } from "bun:test";
import { HutchError, OUTPUT_TEXT_MAX, type AnchoredAnnotation, type SessionEvent } from "@hutch/shared";
import { outputTexts } from "../src/ide/output.ts";
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

describe("outputTexts: what a log view's output rows printed", () => {
  const enc = new TextEncoder();
  const ev = (seq: number, kind: string, data: unknown): SessionEvent => ({
    session: "ses_x",
    seq,
    at: "2026-12-03T00:00:00.000Z",
    actor: { kind: "system", id: "system" },
    kind,
    data,
  });

  test("each output event's bytes as text, escape sequences stripped; a chunk read once; redraws and other kinds skipped; dropped said", async () => {
    const chunks: Record<number, Uint8Array> = {
      0: enc.encode("\x1b[1;32mok\x1b[0m\r\n$ \x1b]0;title\x07"),
      1: enc.encode("second"),
    };
    const asked: string[] = [];
    const d = {
      bytes: async (path: string) => {
        asked.push(path);
        const n = Number(path.split("/").at(-1));
        if (n === 2) throw new HutchError("not_found", "dropped", undefined, { dropped: true });
        return chunks[n]!;
      },
    };
    const out = await outputTexts(d, "ses_x", [
      ev(1, "output.appended", { chunk: 0, offset: 0, length: chunks[0]!.length }),
      ev(2, "input.sent", { text: "ls\n" }),
      ev(3, "output.appended", { chunk: 1, offset: 3, length: 3 }),
      ev(4, "output.appended", { chunk: 1, offset: 0, length: 3 }),
      ev(5, "output.appended", { chunk: 0, offset: 0, length: 4, snapshot: true }),
      ev(6, "output.appended", { chunk: 2, offset: 0, length: 9 }),
    ]);
    expect(out).toEqual([
      { seq: 1, text: "ok\n$ " },
      { seq: 3, text: "ond" },
      { seq: 4, text: "sec" },
      { seq: 6, text: "", dropped: true },
    ]);
    expect(asked.length).toBe(3);
  });

  test("a long output is cut and says so; an error other than a missing chunk is the caller's", async () => {
    const big = { bytes: async () => enc.encode("y".repeat(OUTPUT_TEXT_MAX + 10)) };
    const [o] = await outputTexts(big, "ses_x", [ev(1, "output.appended", { chunk: 0, offset: 0, length: OUTPUT_TEXT_MAX + 10 })]);
    expect(o).toMatchObject({ cut: true });
    expect(o!.text.length).toBe(OUTPUT_TEXT_MAX);
    const broken = {
      bytes: async () => {
        throw new HutchError("unavailable", "daemon gone");
      },
    };
    await expect(outputTexts(broken, "ses_x", [ev(1, "output.appended", { chunk: 0, offset: 0, length: 1 })])).rejects.toThrow(
      "daemon gone",
    );
  });
});
