// Resolved only in the compiled host (see scripts/build.ts): the guest binary,
// embedded as a file asset.
// @ts-expect-error -- the asset exists only after the guest is built
import guest from "../../../dist/.embed/hutch-guest" with { type: "file" };
export default guest as string;
