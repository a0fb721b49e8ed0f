// Starting the box's own Chromium: Debian's build, run directly (not through
// the /usr/bin/chromium wrapper script, which reads /etc/chromium.d), headless,
// with a fresh profile in the box's /tmp. Its DevTools port is on the box's
// loopback; the port is read from the DevToolsActivePort file Chromium writes
// into the profile, so nothing has to be parsed from its stderr.
import { chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../../log.ts";

const CANDIDATES = ["/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
const START_TIMEOUT_MS = 60_000;
/** Viewport of every tab: WXGA, the largest size computer-use models are advised to read without scaling. */
export const VIEWPORT = { width: 1280, height: 800 };

/** Flags measured to work on Debian's Chromium in a sandbox with no network of its own. */
export function chromiumArgs(profile: string, env: Record<string, string | undefined>): string[] {
  const proxy = env.HTTPS_PROXY ?? env.https_proxy ?? env.HTTP_PROXY ?? env.http_proxy;
  return [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    // Every iframe in the page's own renderer, so one accessibility call per frame reaches it.
    "--disable-site-isolation-trials",
    "--disable-features=IsolateOrigins,site-per-process,Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
    // Chromium's own calls home would only be refused by the broker (and logged as egress denials).
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--no-pings",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    `--user-data-dir=${profile}`,
    `--window-size=${VIEWPORT.width},${VIEWPORT.height}`,
    // The box reaches the outside only through its broker: the browser goes the same way, so the broker's policy decides.
    ...(proxy ? [`--proxy-server=${proxy}`, "--proxy-bypass-list=<-loopback>;127.0.0.1;localhost"] : []),
    "about:blank",
  ];
}

export interface Chromium {
  port: number;
  pid: number;
  exited: Promise<number>;
  stop(): Promise<void>;
}

export async function findChromium(env: Record<string, string | undefined>): Promise<string | undefined> {
  const wanted = env.HUTCH_CHROMIUM;
  for (const path of wanted ? [wanted] : CANDIDATES) if (await Bun.file(path).exists()) return path;
  return undefined;
}

/** `who`: the box's user when the guest is a VM's root; Chromium never runs as root. */
/** `track`: the guest's process table, so PID 1's reaper leaves Chromium to Bun. */
export async function startChromium(
  env: Record<string, string>,
  who: { uid?: number; gid?: number },
  log: Logger,
  track: (proc: Bun.Subprocess) => void,
): Promise<Chromium> {
  const bin = await findChromium(env);
  if (!bin) throw new Error(`no Chromium in this box (looked for ${CANDIDATES.join(", ")}); a QEMU box needs the desktop image profile`);
  const profile = await mkdtemp(join(tmpdir(), "hutch-chromium-"));
  if (who.uid !== undefined) await chown(profile, who.uid, who.gid ?? who.uid);
  const proc = Bun.spawn([bin, ...chromiumArgs(profile, env)], {
    env: { ...env, HOME: env.HOME ?? profile },
    uid: who.uid,
    gid: who.gid,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  });
  track(proc);
  let stderr = "";
  void (async () => {
    for await (const chunk of proc.stderr) {
      // Kept short: only for the error when it dies at start.
      if (stderr.length < 4096) stderr += Buffer.from(chunk).toString("utf8");
      log.debug("chromium[stderr]", { bytes: chunk.length });
    }
  })();
  const deadline = Date.now() + START_TIMEOUT_MS;
  let port = 0;
  while (!port) {
    if (proc.exitCode !== null) throw new Error(`Chromium exited at start (${proc.exitCode}): ${stderr.slice(0, 1000)}`);
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`Chromium did not open its DevTools port within ${START_TIMEOUT_MS / 1000} s`);
    }
    const text = await readFile(join(profile, "DevToolsActivePort"), "utf8").catch(() => "");
    port = Number(text.split("\n")[0]) || 0;
    if (!port) await Bun.sleep(25);
  }
  log.info("chromium started", { pid: proc.pid, port });
  return {
    port,
    pid: proc.pid,
    exited: proc.exited,
    async stop() {
      proc.kill("SIGTERM");
      const done = await Promise.race([proc.exited.then(() => true), Bun.sleep(3000).then(() => false)]);
      if (!done) proc.kill("SIGKILL");
      await proc.exited;
      await rm(profile, { recursive: true, force: true }).catch(() => {});
    },
  };
}
