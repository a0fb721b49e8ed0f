// How a build reports as it goes. The build runs in the daemon's image-build
// worker (./worker.ts), which turns these calls into an operation's lines;
// the CLI draws them (host/src/client/progress.ts).

export interface Progress {
  step(title: string): void;
  detail(text: string): void;
  /** Something the person should read whatever the outcome (a tool being installed). */
  note(text: string): void;
  done(summary: string): void;
}
