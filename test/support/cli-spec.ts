/**
 * Checks an llmgw invocation written in a deployment file (docker-compose,
 * Kubernetes) against the real command line: the commander program the
 * `llmgw` binary runs, read instead of parsed, so nothing is started.
 */
import type { Command, Option } from "commander";
import { buildProgram } from "../../src/cli/program.js";

const program = buildProgram();

/** The subcommand `args` name (`["catalog", "apply", …]` → catalog apply) and the arguments after it. */
function resolve(args: readonly string[]): { cmd: Command; name: string; rest: string[] } | undefined {
  let cmd: Command | undefined;
  let children = program.commands;
  let i = 0;
  while (i < args.length) {
    const next = children.find((c) => c.name() === args[i] || c.aliases().includes(args[i] ?? ""));
    if (!next) break;
    cmd = next;
    children = next.commands;
    i++;
  }
  if (!cmd) return undefined;
  return { cmd, name: args.slice(0, i).join(" "), rest: args.slice(i) };
}

/** Options `cmd` takes: its own and the program's (`--config-file`). */
function optionsOf(cmd: Command): Option[] {
  return [...cmd.options, ...program.options];
}

/** Every environment variable the command reads (each option's `env:`). */
export function envVarsOf(cmd: Command): Set<string> {
  return new Set(optionsOf(cmd).flatMap((o) => (o.envVar ? [o.envVar] : [])));
}

/**
 * What is wrong with running `llmgw <args>` with `env` set (names only); empty
 * when nothing. Variables not named LLMGW_* are the deployment's own (e.g.
 * NODE_NAME, substituted into the arguments by Kubernetes) and are not checked.
 */
export function invocationProblems(args: readonly string[], env: readonly string[] = []): string[] {
  const found = resolve(args);
  if (!found) return [`llmgw has no command ${JSON.stringify(args[0] ?? "")}`];
  const { cmd, name, rest } = found;
  const problems: string[] = [];
  const options = optionsOf(cmd);
  let positional = 0;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] ?? "";
    if (!arg.startsWith("-")) {
      positional++;
      continue;
    }
    const [flag, inline] = arg.split(/=(.*)/s, 2) as [string, string | undefined];
    const opt = options.find((o) => o.long === flag || o.short === flag);
    if (!opt) {
      problems.push(`llmgw ${name} has no ${flag}`);
      continue;
    }
    if ((opt.required || opt.optional) && inline === undefined) {
      const value = rest[i + 1];
      if (value === undefined || (opt.required && value.startsWith("--"))) {
        problems.push(`llmgw ${name} ${flag} needs a value`);
      } else i++;
    } else if (!opt.required && !opt.optional && inline !== undefined) {
      problems.push(`llmgw ${name} ${flag} takes no value`);
    }
  }
  const takes = cmd.registeredArguments.length;
  if (positional > takes && !cmd.registeredArguments.at(-1)?.variadic) {
    problems.push(`llmgw ${name} takes ${takes} argument(s), got ${positional}`);
  }
  const known = envVarsOf(cmd);
  for (const v of env) {
    if (v.startsWith("LLMGW_") && !known.has(v)) problems.push(`llmgw ${name} reads no ${v}`);
  }
  return problems;
}

/** The subcommand an invocation runs (`gateway`), or undefined. */
export function commandOf(args: readonly string[]): Command | undefined {
  return resolve(args)?.cmd;
}
