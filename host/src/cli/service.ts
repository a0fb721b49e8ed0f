// `hutch service`: install or remove the systemd unit that runs `hutch serve`.
import { body, command, type GlobalArgs } from "./args.ts";
import { printJson } from "./output.ts";
import { selfArgv } from "../self.ts";

type ServiceArgs = GlobalArgs & { "user-unit": boolean };

const scopeOption = {
  "user-unit": { type: "boolean" as const, default: false, describe: "a unit of your own (systemctl --user) instead of the system's" },
};

export const service = body<GlobalArgs>({
  demand: "name a service command",
  commands: [
    command<ServiceArgs>({
      command: "install",
      describe: "write a systemd unit and env file that start hutch serve at boot (doctor first), restart it on failure",
      options: scopeOption,
      run: async (a) => {
        const { install, unitPaths } = await import("../service/systemd.ts");
        const scope = a["user-unit"] ? "user" : "system";
        const r = install({ scope, bin: selfArgv()[0]!, home: a.home, paths: unitPaths(scope) });
        if (a.json) return printJson(r);
        process.stdout.write(
          `wrote ${r.unit}\nsettings in ${r.env}\n${r.started ? "started hutch.service\n" : "systemd does not run here; start it where it does:\n"}${r.next.map((n) => `  ${n}\n`).join("")}`,
        );
      },
    }),
    command<ServiceArgs>({
      command: "uninstall",
      describe: "stop and remove the unit and its env file (boxes and $HUTCH_HOME are kept)",
      options: scopeOption,
      run: async (a) => {
        const { uninstall, unitPaths } = await import("../service/systemd.ts");
        const scope = a["user-unit"] ? "user" : "system";
        const r = uninstall(scope, unitPaths(scope));
        if (a.json) return printJson(r);
        process.stdout.write(r.removed.length ? `removed ${r.removed.join(", ")}\n` : "no hutch unit was installed\n");
      },
    }),
  ],
});
