// Importing a bundle that came out of a box, without `git fetch`: git 2.39
// does not fsck objects fetched from a bundle whatever fetch.fsckObjects
// says, so the header is read here (bounded, every line checked) and the
// pack goes to `index-pack --strict`, which checks every object as fsck
// would. Only the refs asked for are taken, and they must be reachable
// from what arrived plus the prerequisites (connectivity checked).
import { HutchError } from "@hutch/shared/base";
import { git } from "./git.ts";

const SIGNATURE = "# v2 git bundle\n";
/** A header longer than this is not a bundle of two refs. */
const MAX_HEADER = 64 * 1024;
const SHA = /^[0-9a-f]{40}$/;

export interface BundleHeader {
  prerequisites: string[];
  refs: Map<string, string>;
  /** Where the pack starts. */
  packOffset: number;
}

/** Parses a v2 bundle header; throws naming what is wrong. */
export function parseBundleHeader(head: Uint8Array): BundleHeader {
  const text = new TextDecoder("latin1").decode(head.subarray(0, MAX_HEADER));
  if (!text.startsWith(SIGNATURE)) throw new Error("not a v2 git bundle");
  const end = text.indexOf("\n\n");
  if (end < 0) throw new Error(`no end of header within ${MAX_HEADER} bytes`);
  const prerequisites: string[] = [];
  const refs = new Map<string, string>();
  for (const line of text.slice(SIGNATURE.length, end).split("\n")) {
    if (line.startsWith("-")) {
      const sha = line.slice(1, 41);
      if (!SHA.test(sha)) throw new Error(`bad prerequisite line: ${line.slice(0, 80)}`);
      prerequisites.push(sha);
      continue;
    }
    const [sha, ref, ...rest] = line.split(" ");
    if (!sha || !SHA.test(sha) || !ref || rest.length) throw new Error(`bad ref line: ${line.slice(0, 80)}`);
    refs.set(ref, sha);
  }
  return { prerequisites, refs, packOffset: end + 2 };
}

/** The stream without its first n bytes (a sliced Bun.file's stream() starts at 0 in Bun 1.4.5). */
function skip(stream: ReadableStream<Uint8Array>, n: number): ReadableStream<Uint8Array> {
  let left = n;
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        if (left >= chunk.length) {
          left -= chunk.length;
          return;
        }
        out.enqueue(left > 0 ? chunk.subarray(left) : chunk);
        left = 0;
      },
    }),
  );
}

/** Imports the bundle's objects into root and returns the commit each wanted ref names. */
export async function importBundle(root: string, path: string, wanted: string[]): Promise<Record<string, string>> {
  const file = Bun.file(path);
  let header: BundleHeader;
  try {
    header = parseBundleHeader(new Uint8Array(await file.slice(0, MAX_HEADER).arrayBuffer()));
  } catch (err) {
    throw new HutchError("denied", `refused the bundle the box sent: ${(err as Error).message}`);
  }
  const out: Record<string, string> = {};
  for (const ref of wanted) {
    const sha = header.refs.get(ref);
    if (!sha) throw new HutchError("denied", `the bundle the box sent has no ${ref}`);
    out[ref] = sha;
  }
  for (const p of header.prerequisites)
    if ((await git(root, ["cat-file", "-e", `${p}^{commit}`], { ok: [1, 128] })).code !== 0)
      throw new HutchError("denied", `the bundle the box sent needs ${p.slice(0, 12)}, which this repository does not have`);
  const r = await git(root, ["index-pack", "--strict", "--fix-thin", "--stdin"], {
    stdin: skip(file.stream(), header.packOffset),
    ok: [1, 128],
  });
  if (r.code !== 0) throw new HutchError("denied", `refused the objects the box sent: ${r.stderr.trim().split("\n").slice(-2).join("; ")}`);
  const conn = await git(root, ["rev-list", "--quiet", "--objects", ...Object.values(out), "--not", ...header.prerequisites, "--"], {
    ok: [1, 128],
  });
  if (conn.code !== 0) throw new HutchError("denied", "the bundle the box sent is missing objects its refs need");
  return out;
}
