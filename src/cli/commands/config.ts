/**
 * `llmgw config set-context|use-context|get-contexts|current-context|delete-context`:
 * the operator's contexts (API URL and token file by name, and the one in
 * use), like kubectl's, in `$XDG_CONFIG_HOME/llmgw/config.yaml` (else
 * `~/.config/llmgw/config.yaml`; --config or LLMGW_CONFIG names another).
 */
import { accessSync, constants } from "node:fs";
import { resolve } from "node:path";
import { type Command, Option } from "commander";
import { CliError, EXIT } from "../common.js";
import {
  type ContextsFile,
  contextSchema,
  contextsFilePath,
  readContextsFile,
  writeContextsFile,
} from "../contexts.js";
import { printList } from "./list-output.js";
import { formatTable, type OutputFormat, outputOf, withOutputOption } from "./operator-common.js";

interface ConfigFlags {
  config?: string;
}

function withConfigOption(cmd: Command): Command {
  return cmd.addOption(
    new Option(
      "--config <file>",
      "the contexts file (default $XDG_CONFIG_HOME/llmgw/config.yaml, else ~/.config/llmgw/config.yaml)",
    ).env("LLMGW_CONFIG"),
  );
}

function load(flags: ConfigFlags): { file: string; data: ContextsFile } {
  const file = contextsFilePath(flags.config);
  return { file, data: readContextsFile(file) };
}

export function registerConfig(program: Command): void {
  const config = program
    .command("config")
    .description(
      "operator contexts (API URL and token file by name), like kubectl: a command that reaches the API takes --api/--token, then LLMGW_API_URL/LLMGW_API_TOKEN, then the current context",
    );

  withConfigOption(
    config
      .command("set-context <name>")
      .description("add a context, or change the given fields of an existing one")
      .option("--api <url>", "the operator API's base URL, e.g. https://llmgw-api.example.com")
      .option("--token-file <file>", "a file holding the API token (the token itself is not stored)"),
  ).action((name: string, flags: ConfigFlags & { api?: string; tokenFile?: string }) => {
    const { file, data } = load(flags);
    const i = data.contexts.findIndex((c) => c.name === name);
    const before = i >= 0 ? data.contexts[i] : undefined;
    if (!before && flags.api === undefined)
      throw new CliError(`--api is required for a new context (${name} is not in ${file})`);
    const tokenFile = flags.tokenFile === undefined ? before?.tokenFile : resolve(flags.tokenFile);
    if (flags.tokenFile !== undefined && tokenFile !== undefined) {
      try {
        accessSync(tokenFile, constants.R_OK);
      } catch (err) {
        throw new CliError(`--token-file ${flags.tokenFile}: cannot read it: ${(err as Error).message}`);
      }
    }
    const parsed = contextSchema.safeParse({
      name,
      api: flags.api ?? before?.api,
      ...(tokenFile === undefined ? {} : { tokenFile }),
    });
    if (!parsed.success) {
      const flagOf: Record<string, string> = { name: "<name>", api: "--api", tokenFile: "--token-file" };
      throw new CliError(
        parsed.error.issues
          .map((x) => `${flagOf[String(x.path[0])] ?? String(x.path[0])}: ${x.message}`)
          .join("\n"),
      );
    }
    if (i >= 0) data.contexts[i] = parsed.data;
    else data.contexts.push(parsed.data);
    writeContextsFile(file, data);
    process.stdout.write(`context ${name} ${i >= 0 ? "changed" : "added"} in ${file}\n`);
  });

  withConfigOption(config.command("use-context <name>").description("make a context the current one")).action(
    (name: string, flags: ConfigFlags) => {
      const { file, data } = load(flags);
      if (!data.contexts.some((c) => c.name === name)) {
        const known = data.contexts.map((c) => c.name).join(", ") || "none";
        throw new CliError(`no context ${JSON.stringify(name)} in ${file} (it has: ${known})`);
      }
      data.currentContext = name;
      writeContextsFile(file, data);
      process.stdout.write(`switched to context ${name}\n`);
    },
  );

  withConfigOption(
    config.command("current-context").description("print the current context's name (exit 1 when none)"),
  ).action((flags: ConfigFlags) => {
    const { file, data } = load(flags);
    if (data.currentContext === undefined)
      throw new CliError(
        `no current context in ${file}; choose one with llmgw config use-context NAME`,
        EXIT.failure,
      );
    process.stdout.write(`${data.currentContext}\n`);
  });

  withOutputOption(
    withConfigOption(
      config.command("get-contexts").description("list the contexts; * marks the current one"),
    ),
  ).action((flags: ConfigFlags & { output?: OutputFormat; json?: boolean }) => {
    const { data } = load(flags);
    printList(outputOf(flags), data, {
      table: (d) =>
        formatTable(
          ["CURRENT", "NAME", "API", "TOKEN FILE"],
          d.contexts.map((c) => [c.name === d.currentContext ? "*" : "", c.name, c.api, c.tokenFile ?? ""]),
        ),
    });
  });

  withConfigOption(
    config
      .command("delete-context <name>")
      .description("remove a context (the current one too: then none is)"),
  ).action((name: string, flags: ConfigFlags) => {
    const { file, data } = load(flags);
    const before = data.contexts.length;
    data.contexts = data.contexts.filter((c) => c.name !== name);
    if (data.contexts.length === before) throw new CliError(`no context ${JSON.stringify(name)} in ${file}`);
    if (data.currentContext === name) delete data.currentContext;
    writeContextsFile(file, data);
    process.stdout.write(`context ${name} deleted from ${file}\n`);
  });
}
