// A credentialed request's target, turned into the one path the broker checks
// against the binding and sends. The invariant: the path a binding's prefixes
// are checked against is, byte for byte, the path on the wire to the upstream.
// So a target is either normalised into a form no server reads two ways (dot
// segments removed as RFC 3986 5.2.4 says, runs of slashes merged), or refused
// with 400 when what it means depends on how the upstream decodes it: encoded
// dots, slashes and backslashes, raw backslashes, encoded control bytes,
// encoded bytes that are not UTF-8 (overlong dots and slashes), `..;` segments,
// fragments; and, last, anything the URL parser under fetch would rewrite.
import { HttpError } from "./http.ts";

export interface Route {
  binding: string;
  /** Normalised, starts with "/", no dot segments, no empty segment but a trailing one. */
  path: string;
  /** "" or "?..." as the box sent it (never normalised: it is not a path). */
  query: string;
}

/** The absolute form naming the broker itself on loopback; any other absolute URL is plain proxying. */
const ABSOLUTE = /^http:\/\/(?:127\.0\.0\.1|localhost)(?::[0-9]{1,5})?(\/.*)$/i;
const ROUTE = /^\/([a-z0-9][a-z0-9-]{0,31})(\/.*)?$/;
const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * `/<binding>/<path>[?query]` (or the same as an absolute URL naming the
 * broker on loopback): the binding and the normalised rest. null when the
 * target is not a route at all; HttpError 400 when it is one the broker will
 * not normalise.
 */
export function parseRoute(target: string): Route | null {
  const raw = ABSOLUTE.exec(target)?.[1] ?? target;
  if (!raw.startsWith("/")) return null;
  const q = raw.indexOf("?");
  const query = q < 0 ? "" : raw.slice(q);
  checkBytes(query, "query");
  const m = ROUTE.exec(normalisePath(q < 0 ? raw : raw.slice(0, q)));
  if (!m) return null;
  return { binding: m[1]!, path: m[2] ?? "/", query };
}

/** An origin-form path with its dot segments removed and its slashes merged; HttpError 400 for what may not be normalised. */
export function normalisePath(raw: string): string {
  if (!raw.startsWith("/")) throw refused(raw, "does not start with /");
  checkBytes(raw, "path");
  if (raw.includes("\\")) throw refused(raw, "has a backslash, which some servers read as /; use /");
  checkEscapes(raw);
  const segments = raw.slice(1).split("/");
  const out: string[] = [];
  segments.forEach((seg, i) => {
    // Tomcat and Jetty strip ";params" from a segment before resolving it, so "..;x" is ".." to them.
    if (/^\.\.?;/.test(seg))
      throw refused(raw, `has the segment ${JSON.stringify(seg.slice(0, 40))}, which servers that strip ;parameters read as a dot segment`);
    if (seg === "." || seg === "..") {
      if (seg === "..") out.pop();
      // "/a/b/.." is "/a/": a dot segment at the end leaves the slash before it.
      if (i === segments.length - 1) out.push("");
      return;
    }
    out.push(seg);
  });
  // After the dot segments (as RFC 3986 resolves them), runs of slashes become one; a trailing slash stays.
  return `/${out.filter((s, i) => s !== "" || i === out.length - 1).join("/")}`;
}

/**
 * The URL to hand to fetch for `pathAndQuery` at `origin`, refused (400) if
 * the WHATWG URL parser would put anything else on the wire: it
 * percent-encodes some characters (`"`, `{`, `'` in a query, ...) and would
 * resolve what normalisePath left alone if the two ever disagreed.
 */
export function requestUrl(origin: string, pathAndQuery: string): string {
  const url = new URL(`${origin}${pathAndQuery}`);
  const wire = url.href.slice(url.origin.length);
  if (!url.href.startsWith(url.origin) || wire !== pathAndQuery) {
    throw new HttpError(
      400,
      `the target ${JSON.stringify(pathAndQuery.slice(0, 200))} would go out as ${JSON.stringify(wire.slice(0, 200))}; percent-encode the characters that differ and retry`,
    );
  }
  return url.href;
}

/** Only visible ASCII and no fragment: the request line guarantees the first already, and this module must not depend on that. */
function checkBytes(part: string, what: "path" | "query"): void {
  for (let i = 0; i < part.length; i++) {
    const c = part.charCodeAt(i);
    if (c < 0x21 || c > 0x7e)
      throw new HttpError(400, `the request ${what} has the byte 0x${c.toString(16).padStart(2, "0")}; percent-encode it and retry`);
  }
  if (part.includes("#"))
    throw new HttpError(400, "the request target has a fragment (#); a request never carries one, so strip it and retry");
}

function checkEscapes(raw: string): void {
  if (/%(?![0-9A-Fa-f]{2})/.test(raw)) throw refused(raw, "has a % that is not followed by two hex digits; encode a literal % as %25");
  let run: number[] = [];
  const endRun = () => {
    if (run.length === 0) return;
    try {
      fatalUtf8.decode(new Uint8Array(run));
    } catch {
      throw refused(raw, "has percent-encoded bytes that are not UTF-8 (overlong forms of . and / among them)");
    }
    run = [];
  };
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] !== "%") {
      endRun();
      continue;
    }
    const byte = parseInt(raw.slice(i + 1, i + 3), 16);
    const encoded = raw.slice(i, i + 3);
    if (byte === 0x2e || byte === 0x2f || byte === 0x5c) {
      throw refused(
        raw,
        `has ${encoded} (an encoded "${String.fromCharCode(byte)}"), which means something else to a server that decodes it before resolving the path than to one that does not`,
      );
    }
    if (byte < 0x20 || byte === 0x7f) throw refused(raw, `has ${encoded}, an encoded control byte`);
    run.push(byte);
    i += 2;
  }
  endRun();
}

function refused(path: string, why: string): HttpError {
  return new HttpError(
    400,
    `the path ${JSON.stringify(path.slice(0, 200))} ${why}; the broker forwards only paths every server reads the same way`,
  );
}
