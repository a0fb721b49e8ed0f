// The restore's file writer (write-thread.ts): creates the files it is handed,
// in order, each as restore-files.ts says.
import { type WriteJob, writeJob } from "./restore-files.ts";
import { serveRing } from "./ring-thread.ts";

serveRing<null, WriteJob, number, null>({
  init() {},
  jobs(jobs, bytes) {
    let refused = 0;
    for (const j of jobs) refused += writeJob(j, bytes(j));
    return refused;
  },
  flush: () => null,
  discard() {},
});
