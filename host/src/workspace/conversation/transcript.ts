// An agent's transcript as JSONL records: read with bounds, every line checked
// to be one JSON object, and rewritten value by value (paths from one machine
// to the other, the conversation's id, secrets redacted). Rewriting works on
// parsed strings, never on the raw text, so a replacement cannot break the
// JSON or reach into a key.
import { tooDeep } from "@hutch/shared";

/** A transcript over this is not carried either way (a day of heavy work is a few MiB). */
export const TRANSCRIPT_MAX = 64 * 1024 * 1024;
/** One record over this is not a record: Claude Code's biggest (a tool result) are a few MiB. */
const LINE_MAX = 16 * 1024 * 1024;
const DEPTH_MAX = 64;

export type Records = Record<string, unknown>[];

/** The records of a JSONL text, or why it is not one. A last line cut mid-write (the CLI still running) is dropped when `lenientTail`. */
export function parseJsonl(text: string, lenientTail = false): { records: Records } | { problem: string } {
  if (text.length > TRANSCRIPT_MAX) return { problem: `over ${TRANSCRIPT_MAX} bytes` };
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const records: Records = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === "") continue;
    const last = i === lines.length - 1;
    if (line.length > LINE_MAX) return { problem: `line ${i + 1} is over ${LINE_MAX} bytes` };
    if (tooDeep(line, DEPTH_MAX) !== null) return { problem: `line ${i + 1} nests deeper than ${DEPTH_MAX}` };
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      if (last && lenientTail) break;
      return { problem: `line ${i + 1} is not JSON` };
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) return { problem: `line ${i + 1} is not a JSON object` };
    records.push(v as Record<string, unknown>);
  }
  return { records };
}

export const toJsonl = (records: Records) => records.map((r) => `${JSON.stringify(r)}\n`).join("");

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A path prefix replaced only where it ends a path component (so /a/repo does not match /a/repo2). */
export interface PathMap {
  from: string;
  to: string;
}

/**
 * Well-known credential shapes, redacted from what goes into a box whatever
 * file they came from: a transcript holds what the user pasted and what tools
 * printed.
 */
const TOKEN_PATTERNS = [
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----/g,
  /\bsk-ant-[A-Za-z0-9_-]{20,}/g,
  /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}/g,
  /\bgh[pousr]_[A-Za-z0-9]{30,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{30,}/g,
  /\bglpat-[A-Za-z0-9_-]{20,}/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
];
export const REDACTED = "[redacted by hutch]";

export interface Rewrite {
  paths: PathMap[];
  /** Exact strings replaced everywhere (a conversation id given a fresh one). */
  ids?: [string, string][];
  /** Literal secret values to redact (from held-back files, the environment), longest first. */
  secrets?: string[];
  /** Redact the well-known token shapes too. */
  tokens?: boolean;
}

/** Rewrites every string in the records; returns how many secrets were redacted. */
export function rewrite(records: Records, how: Rewrite): { records: Records; redacted: number } {
  let redacted = 0;
  const paths = [...how.paths]
    .filter((p) => p.from && p.from !== p.to)
    .sort((a, b) => b.from.length - a.from.length)
    .map((p) => ({ re: new RegExp(`${escapeRe(p.from)}(?![\\w.-])`, "g"), to: p.to }));
  const secrets = [...new Set(how.secrets ?? [])].filter((s) => s.length >= 8).sort((a, b) => b.length - a.length);
  const str = (s: string): string => {
    let out = s;
    for (const sec of secrets)
      if (out.includes(sec)) {
        redacted += out.split(sec).length - 1;
        out = out.replaceAll(sec, REDACTED);
      }
    if (how.tokens)
      for (const re of TOKEN_PATTERNS)
        out = out.replace(re, () => {
          redacted++;
          return REDACTED;
        });
    for (const p of paths) out = out.replace(p.re, p.to);
    for (const [a, b] of how.ids ?? []) out = out.replaceAll(a, b);
    return out;
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return str(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return { records: records.map((r) => walk(r) as Record<string, unknown>), redacted };
}

/** The values a held-back file holds (`KEY=value` values, and every longer line), to be redacted wherever they appear. */
export function secretValues(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.length < 8 || line.startsWith("#")) continue;
    out.push(line);
    const m = /^(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:]\s*(.+)$/.exec(line);
    if (m) {
      const v = m[1]!.trim().replace(/^(["'])(.*)\1$/, "$2");
      if (v.length >= 8) out.push(v);
    }
  }
  return out;
}

export const sha256 = (text: string) => new Bun.CryptoHasher("sha256").update(text).digest("hex");
