// The snapshot backend's contract on the local directory backend, in a temp dir.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalBackend } from "../src/snapshot/local.ts";
import { describeSnapshotBackendContract } from "./contracts/snapshot-backend.contract.ts";

describeSnapshotBackendContract("local directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "hutch-backend-"));
  return {
    open: () => {
      const backend = new LocalBackend(join(dir, "store"));
      return { store: backend, close: () => backend.close() };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
});
