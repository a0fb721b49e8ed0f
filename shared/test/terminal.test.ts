// Untrusted text on a terminal: control sequences arrive escaped and readable,
// ordinary text is left alone, and the escaped form reads back one way only.
import { describe, expect, test } from "bun:test";
import { terminalJson, terminalText } from "../src/text/terminal.ts";

/** Anything a terminal would act on, or that reorders what is read. */
const RAW = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

describe("terminalText", () => {
  test.each([
    ["plain text", "hello, world", "hello, world"],
    ["newlines and tabs stay", "a\n\tb", "a\n\tb"],
    ["unicode stays", "naïve ✎ 日本 — ok", "naïve ✎ 日本 — ok"],
    ["OSC 52 clipboard write", "\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"],
    ["OSC 52 ended by ST", "\x1b]52;c;aGk=\x1b\\", "\\x1b]52;c;aGk=\\x1b\\"],
    ["title change", "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"],
    ["screen clear", "\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"],
    ["full reset", "\x1bc", "\\x1bc"],
    ["C1 CSI", "\u009b2J", "\\x9b2J"],
    ["C1 OSC and ST", "\u009d0;t\u009c", "\\x9d0;t\\x9c"],
    ["DEL and NUL", "a\x7fb\x00", "a\\x7fb\\x00"],
    ["carriage return overwrites a line", "rm -rf /\rsafe", "rm -rf /\\x0dsafe"],
    ["backspace", "ok\b\b", "ok\\x08\\x08"],
    ["bidi override (Trojan Source)", "if (a\u202e) {", "if (a\\u202e) {"],
    ["bidi isolates", "\u2066x\u2069\u2067\u2068", "\\u2066x\\u2069\\u2067\\u2068"],
    ["every embedding", "\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"],
    ["a Windows path keeps its backslashes", "C:\\Users\\me\\src", "C:\\Users\\me\\src"],
    ["a literal \\x escape is doubled", "printf '\\x1b'", "printf '\\\\x1b'"],
    ["a literal \\u escape is doubled", '"\\u202e"', '"\\\\u202e"'],
    ["a backslash before an escaped character is doubled", "\\\x1b", "\\\\\\x1b"],
    ["a run of backslashes before x is doubled", "\\\\x", "\\\\\\\\x"],
    ["a trailing backslash stays", "dir\\", "dir\\"],
  ])("%s", (_, input, want) => {
    expect(terminalText(input)).toBe(want);
    expect(terminalText(input)).not.toMatch(RAW);
  });

  test.each([
    ["newline", "a\nb", "a\\x0ab"],
    ["tab", "a\tb", "a\\x09b"],
    ["CRLF", "a\r\n", "a\\x0d\\x0a"],
    ["a backslash before a newline", "a\\\nb", "a\\\\\\x0ab"],
  ])("oneLine escapes a %s", (_, input, want) => {
    expect(terminalText(input, { oneLine: true })).toBe(want);
    expect(terminalText(input, { oneLine: true })).not.toMatch(/[\n\t]/);
  });

  /** Reads the escaped form back: the inverse exists only if the form is unambiguous. */
  const decode = (s: string) =>
    s.replace(/(\\+)(?:(x[0-9a-f]{2}|u[0-9a-f]{4})|([xu]))?/g, (run: string, slashes: string, esc?: string, letter?: string) => {
      const after = esc ?? letter;
      if (!after) return run;
      const literal = "\\".repeat(Math.floor(slashes.length / 2));
      if (slashes.length % 2 === 0) return literal + after;
      if (!esc) throw new Error(`an escape with no code point: ${run}`);
      return literal + String.fromCharCode(Number.parseInt(esc.slice(1), 16));
    });

  test("the escaped form reads back to the original, for any mix of backslashes, x, u and controls", () => {
    const alphabet = ["\\", "x", "u", "1", "b", "a", "\x1b", "\n", "\t", "\u009b", "\u202e", "\x07", " "];
    let seed = 26;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 5000; i++) {
      const s = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => alphabet[Math.floor(rand() * alphabet.length)]).join("");
      for (const oneLine of [false, true]) {
        const out = terminalText(s, { oneLine });
        expect(out).not.toMatch(RAW);
        if (oneLine) expect(out).not.toMatch(/[\n\t]/);
        expect(decode(out)).toBe(s);
      }
    }
  });
});

describe("terminalJson", () => {
  test("C0 controls were already escaped by JSON; DEL, C1 and bidi are escaped too, and the value is the same", () => {
    const value = { text: "\x1b]52;c;aGk=\x07 \x1b[2J \x1bc \u009b2J \x7f \u202e \u2066 \u2028", anchor: { path: "a\u009bb" } };
    const out = terminalJson(value);
    expect(out).not.toMatch(RAW);
    expect(out).toContain("\\u001b]52;c;aGk=\\u0007");
    expect(out).toContain("\\u009b2J");
    expect(out).toContain("\\u202e");
    expect(JSON.parse(out)).toEqual(value);
  });

  test("plain JSON is unchanged, indented as asked", () => {
    const value = { a: [1, "two", null], b: "C:\\x" };
    expect(terminalJson(value)).toBe(JSON.stringify(value));
    expect(terminalJson(value, 2)).toBe(JSON.stringify(value, null, 2));
  });
});
