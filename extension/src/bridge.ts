// The language client that runs `hutch ide --stdio`. vscode-languageclient
// gives restarts on crash, the trace channel and diagnostics for free.
import type * as vscode from "vscode";
import { LanguageClient, TransportKind, type LanguageClientOptions, type ServerOptions } from "vscode-languageclient/node";
import type { HutchBinary } from "./binary.ts";

export function bridgeClient(bin: HutchBinary, config: vscode.WorkspaceConfiguration): LanguageClient {
  const remote = config.get<string>("remote") ?? "";
  const home = config.get<string>("home") ?? "";
  const args = ["ide", "--stdio", ...(remote ? ["--remote", remote] : [])];
  const env = { ...process.env, ...(home ? { HUTCH_HOME: home } : {}) };
  const server: ServerOptions = {
    run: { command: bin.path, args, transport: TransportKind.stdio, options: { env } },
    debug: { command: bin.path, args, transport: TransportKind.stdio, options: { env: { ...env, HUTCH_LOG_LEVEL: "debug" } } },
  };
  const client: LanguageClientOptions = {
    // Anchored annotations arrive as diagnostics for any file of the workspace.
    documentSelector: [{ scheme: "file" }],
    diagnosticCollectionName: "hutch",
    outputChannelName: "hutch",
  };
  return new LanguageClient("hutch", "hutch", server, client);
}

/** Environment for CLI verbs the extension runs in terminals (attach, doctor): the same home and remote as the bridge. */
export function cliEnv(config: vscode.WorkspaceConfiguration): Record<string, string> {
  const home = config.get<string>("home") ?? "";
  const remote = config.get<string>("remote") ?? "";
  return { ...(home ? { HUTCH_HOME: home } : {}), ...(remote ? { HUTCH_REMOTE: remote } : {}) };
}
