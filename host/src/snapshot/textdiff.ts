// A unified diff of two texts, for `snapshot diff`: review-ready hunks with
// three lines of context. Common prefix and suffix are cut first; the middle
// is an LCS table, refused above MAX_CELLS (the caller then shows sizes), so
// a diff of two large rewritten files costs a bounded amount of work.
const CONTEXT = 3;
const MAX_CELLS = 4_000_000;

type Op = [" " | "-" | "+", string];

function lines(text: string): string[] {
  const out = text.split("\n");
  if (out.at(-1) === "") out.pop();
  return out;
}

/** The edit script from a to b, or null when the changed middle is too large to compare. */
function script(a: string[], b: string[]): Op[] | null {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const ma = a.slice(pre, a.length - suf);
  const mb = b.slice(pre, b.length - suf);
  if ((ma.length + 1) * (mb.length + 1) > MAX_CELLS) return null;
  const w = mb.length + 1;
  const t = new Uint32Array((ma.length + 1) * w);
  for (let i = ma.length - 1; i >= 0; i--) {
    for (let j = mb.length - 1; j >= 0; j--)
      t[i * w + j] = ma[i] === mb[j] ? t[(i + 1) * w + j + 1]! + 1 : Math.max(t[(i + 1) * w + j]!, t[i * w + j + 1]!);
  }
  const ops: Op[] = a.slice(0, pre).map((l) => [" ", l]);
  let i = 0;
  let j = 0;
  while (i < ma.length || j < mb.length) {
    if (i < ma.length && j < mb.length && ma[i] === mb[j]) {
      ops.push([" ", ma[i++]!]);
      j++;
    } else if (i < ma.length && (j === mb.length || t[(i + 1) * w + j]! >= t[i * w + j + 1]!)) ops.push(["-", ma[i++]!]);
    else ops.push(["+", mb[j++]!]);
  }
  for (const l of a.slice(a.length - suf)) ops.push([" ", l]);
  return ops;
}

/** `--- a/path` / `+++ b/path` and @@ hunks; null when the texts are too different to compare line by line. */
export function unifiedDiff(path: string, before: string | null, after: string | null): string | null {
  const ops = script(before === null ? [] : lines(before), after === null ? [] : lines(after));
  if (!ops) return null;
  const out = [`--- ${before === null ? "/dev/null" : `a/${path}`}`, `+++ ${after === null ? "/dev/null" : `b/${path}`}`];
  let k = 0;
  // Line numbers (1-based) in a and b at op k.
  const at: [number, number][] = [];
  let la = 1;
  let lb = 1;
  for (const [tag] of ops) {
    at.push([la, lb]);
    if (tag !== "+") la++;
    if (tag !== "-") lb++;
  }
  while (k < ops.length) {
    while (k < ops.length && ops[k]![0] === " ") k++;
    if (k >= ops.length) break;
    const start = Math.max(0, k - CONTEXT);
    let end = k;
    // Extend while the next change is within 2 × CONTEXT unchanged lines.
    for (;;) {
      while (end < ops.length && ops[end]![0] !== " ") end++;
      let run = end;
      while (run < ops.length && ops[run]![0] === " ") run++;
      if (run < ops.length && run - end <= 2 * CONTEXT) end = run;
      else {
        end = Math.min(ops.length, end + CONTEXT);
        break;
      }
    }
    const hunk = ops.slice(start, end);
    const [sa, sb] = at[start]!;
    const na = hunk.filter(([t]) => t !== "+").length;
    const nb = hunk.filter(([t]) => t !== "-").length;
    out.push(`@@ -${na === 0 ? sa - 1 : sa},${na} +${nb === 0 ? sb - 1 : sb},${nb} @@`);
    for (const [t, l] of hunk) out.push(`${t}${l}`);
    k = end;
  }
  return `${out.join("\n")}\n`;
}
