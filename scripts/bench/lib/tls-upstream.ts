// A TLS upstream for the broker bench, in a process of its own so that the
// direct path and the broker's path both cross a process boundary.
//   bun tls-upstream.ts CERT KEY BYTES  → prints its port, serves until killed
//   GET */small → "ok\n"; anything else → BYTES bytes (a sparse file, with its length)
import { openSync, closeSync, ftruncateSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [cert, key, bytes] = process.argv.slice(2);
const blob = join(mkdtempSync(join(tmpdir(), "hutch-bench-blob-")), "blob");
const fd = openSync(blob, "w");
ftruncateSync(fd, Number(bytes));
closeSync(fd);
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  tls: { cert: readFileSync(cert!, "utf8"), key: readFileSync(key!, "utf8") },
  fetch: (req) => (new URL(req.url).pathname.endsWith("/small") ? new Response("ok\n") : new Response(Bun.file(blob))),
});
process.stdout.write(`${server.port}\n`);
