// E2B template names as hutch boxes. E2B's default template, "base" (a Debian
// user land with bash and Python), is a process box: the host's user land,
// the fastest to make. Any other name is a VM image this server has built or
// imported (`hutch image list`), made as a VM box from it; a name that is
// neither is refused, naming both kinds.
import { listImages } from "../image/store.ts";
import type { Templates } from "./sandboxes.ts";

export const BASE_TEMPLATE = "base";

export function e2bTemplates(home: string): Templates {
  return (name) => {
    if (name === BASE_TEMPLATE) return { engine: "process" };
    const image = listImages(home).find((i) => i.name === name && !("problem" in i && i.problem));
    return image ? { engine: "qemu", image: name } : null;
  };
}
