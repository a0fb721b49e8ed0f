// Builds the VM image a profile of tests boots into the shared test cache, or
// finds it up to date (tests/helpers.ts testImage), so the test files that
// boot it, run side by side by scripts/test-runner.ts, do not each build it.
import { testImage } from "./helpers.ts";

const profile = process.argv[2];
if (profile !== "base" && profile !== "desktop") {
  console.error(`usage: bun tests/prepare-image.ts base|desktop (got ${JSON.stringify(profile)})`);
  process.exit(2);
}
console.log(await testImage(profile));
