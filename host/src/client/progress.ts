// An operation's progress for people, on stderr: "[n/N] step: detail
// (elapsed)". On a terminal one line is redrawn every second and a finished
// step leaves one line behind; elsewhere each step is a line and details are
// printed at most every 5 s, so CI logs read top to bottom. With transient
// steps (doctor, whose checks are the record) a step is only the live line on
// a terminal and leaves nothing. Notes are always printed. Output the verb
// prints meanwhile (doctor's checks, on stdout) goes through print(), which
// lifts the status line out of its way.
import type { OpProgress } from "@hutch/shared";
import { terminalText } from "@hutch/shared/text";

/** Steps, details and notes can quote a box (a build's output, a failing check): escaped; the live line stays one line. */
const one = (s: string) => terminalText(s, { oneLine: true });

export interface ProgressDisplay {
  show(p: OpProgress): void;
  /** A line for stdout, printed between redraws. */
  print(text: string): void;
  stop(): void;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

function bytesText(n: number): string {
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(1)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return n >= 1024 ? `${Math.round(n / 1024)} KiB` : `${n} B`;
}

/** "1,204/20,001 files, 310.2 MiB/512.0 MiB, 48.1 MiB/s, 4.0s left". */
export function countsText(p: Extract<OpProgress, { type: "counts" }>): string {
  const files = `${p.files.toLocaleString("en")}${p.filesTotal !== undefined ? `/${p.filesTotal.toLocaleString("en")}` : ""} files`;
  const bytes = `${bytesText(p.bytes)}${p.bytesTotal !== undefined ? `/${bytesText(p.bytesTotal)}` : ""}`;
  const added = p.bytesNew !== undefined ? `, ${bytesText(p.bytesNew)} new` : "";
  const eta = p.etaMs !== undefined ? `, ${seconds(p.etaMs)} left` : "";
  return `${p.phase}: ${files}, ${bytes}${added}, ${bytesText(p.rate)}/s${eta}`;
}

export function progressDisplay(opts: { transientSteps?: boolean } = {}): ProgressDisplay {
  const tty = process.stderr.isTTY === true;
  const keep = !opts.transientSteps;
  const t0 = performance.now();
  let label = "";
  let detail = "";
  let stepStart = t0;
  let lastDetail = 0;
  let drawn = false;
  const line = () =>
    `${label}${detail ? `: ${detail}` : ""} (${seconds(performance.now() - stepStart)}, total ${seconds(performance.now() - t0)})`;
  const clear = () => {
    if (drawn) process.stderr.write("\r\x1b[2K");
    drawn = false;
  };
  const draw = () => {
    if (!tty || !label) return;
    process.stderr.write(`\r\x1b[2K${line().slice(0, (process.stderr.columns || 100) - 1)}`);
    drawn = true;
  };
  const timer = tty ? setInterval(draw, 1000) : undefined;
  const finishStep = () => {
    if (!label) return;
    clear();
    if (keep)
      process.stderr.write(
        tty ? `${label} (${seconds(performance.now() - stepStart)})\n` : `${label} done in ${seconds(performance.now() - stepStart)}\n`,
      );
    label = "";
  };
  return {
    show(p) {
      switch (p.type) {
        case "step":
          finishStep();
          label = `[${p.n}${p.total ? `/${p.total}` : ""}] ${one(p.title)}`;
          detail = "";
          stepStart = performance.now();
          if (tty) draw();
          else if (keep) process.stderr.write(`${label}\n`);
          return;
        case "detail":
          detail = one(p.text);
          if (tty) draw();
          // debootstrap alone reports hundreds of details: one line per 5 s is enough for a log.
          else if (keep && performance.now() - lastDetail >= 5000) {
            lastDetail = performance.now();
            process.stderr.write(`      ${detail}\n`);
          }
          return;
        case "note":
          clear();
          process.stderr.write(`hutch: ${terminalText(p.text)}\n`);
          draw();
          return;
        case "done":
          finishStep();
          process.stderr.write(`${terminalText(p.summary)} in ${seconds(performance.now() - t0)}\n`);
          return;
        case "check":
          return;
        case "counts":
          // Counts come every 250 ms: on a terminal they redraw the line; in a log, one per 5 s.
          detail = countsText(p);
          if (tty) draw();
          else if (keep && performance.now() - lastDetail >= 5000) {
            lastDetail = performance.now();
            process.stderr.write(`      ${detail}\n`);
          }
          return;
      }
    },
    print(text) {
      clear();
      process.stdout.write(text);
      draw();
    },
    stop() {
      if (timer) clearInterval(timer);
      finishStep();
    },
  };
}
