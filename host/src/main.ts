#!/usr/bin/env bun
// hutch: one binary, many roles (CLI verbs, `hutch daemon`).
import { runCli } from "./cli/main.ts";

const code = await runCli(process.argv.slice(2));
process.exit(code);
