/**
 * `llmgw completion`: the bash script is sourced into a real bash and asked
 * to complete, the way bash does on Tab; what it offers is compared with what
 * every command's own --help lists (commands, subcommands, flags).
 *
 * The script comes from a real `llmgw completion bash` process. Every
 * command's --help is rendered by the program main.ts runs (buildProgram,
 * parsed with --help in this process, so help events and added texts are
 * there too), and the texts of real `llmgw … --help` processes are checked to
 * be those very texts: a process per command would cost a second each for
 * nothing more. All Tab presses run in one bash that sources the script once,
 * each in its own subshell, as if in a fresh shell.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Command, CommanderError } from "commander";
import { buildProgram } from "../../src/cli/program.js";
import { runCli } from "../support/cli.js";

/** The commands and the long/short flags a --help output lists. */
function parseHelp(help: string): { commands: string[]; flags: string[] } {
  const section = (title: string): string[] => {
    const start = help.indexOf(`\n${title}:\n`);
    if (start < 0) return [];
    const lines = help.slice(start + title.length + 3).split("\n");
    const end = lines.findIndex((l) => l !== "" && !l.startsWith(" "));
    return end < 0 ? lines : lines.slice(0, end);
  };
  const commands = section("Commands")
    .map((l) => /^ {2}([a-z][a-z-]*)/.exec(l)?.[1])
    .filter((c): c is string => c !== undefined);
  const flags = section("Options").flatMap((l) => {
    const m = /^ {2}((?:-[A-Za-z], )?--[a-z0-9-]+)/.exec(l);
    return m?.[1] ? m[1].split(", ") : [];
  });
  return { commands, flags };
}

/**
 * What `llmgw ...path --help` prints to stdout, from the program main.ts runs,
 * parsed in this process: a fresh program each time (parsing keeps state),
 * every command writing into one buffer at the width of a pipe (as a child's).
 */
async function helpOf(path: string[]): Promise<string> {
  const program = buildProgram();
  let out = "";
  let err = "";
  const capture = (c: Command): void => {
    c.configureOutput({
      writeOut: (s) => {
        out += s;
      },
      writeErr: (s) => {
        err += s;
      },
      getOutHelpWidth: () => 80,
      getErrHelpWidth: () => 80,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    });
    for (const sub of c.commands) capture(sub);
  };
  capture(program);
  await assert.rejects(
    program.parseAsync([...path, "--help"], { from: "user" }),
    (err: unknown) => err instanceof CommanderError && err.exitCode === 0,
    `llmgw ${path.join(" ")} --help did not end as help does`,
  );
  assert.equal(err, "", `llmgw ${path.join(" ")} --help wrote to stderr`);
  return out;
}

describe("llmgw completion", () => {
  let dir: string;
  let script: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "llmgw-completion-"));
    const r = await runCli(["completion", "bash"]);
    assert.equal(r.code, 0, r.stderr);
    script = join(dir, "llmgw.bash");
    writeFileSync(script, r.stdout);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * What bash offers on Tab after each of `queries` (words; the last one is
   * being typed): one bash sources the script once and completes each in a
   * subshell of its own, fenced on stdout and stderr.
   */
  function completeAll(queries: string[][]): string[][] {
    const fence = "\u241e";
    const body = queries
      .map((words) => {
        const quoted = words.map((w) => `'${w}'`).join(" ");
        return `(COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _llmgw; printf '%s\\n' "\${COMPREPLY[@]}"); printf '${fence}\\n'; printf '${fence}\\n' >&2`;
      })
      .join("\n");
    const r = spawnSync("bash", ["-c", `source "$1"\n${body}`, "bash", script], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    assert.equal(r.status, 0, `bash failed: ${r.stderr}`);
    const outs = r.stdout.split(`${fence}\n`);
    const errs = r.stderr.split(`${fence}\n`);
    assert.equal(outs.length, queries.length + 1, "a fenced answer per query");
    assert.equal(errs.length, queries.length + 1, "a fenced stderr per query");
    return queries.map((words, i) => {
      assert.equal(errs[i], "", `bash complained completing ${words.join(" ")}`);
      return (outs[i] ?? "").split("\n").filter((w) => w !== "");
    });
  }
  const complete = (...words: string[]): string[] => completeAll([words])[0] ?? [];

  it("offers every command --help lists, and every subcommand and flag of each", async () => {
    const top = parseHelp(await helpOf([]));
    assert.ok(top.commands.length >= 20, `too few commands parsed from --help: ${top.commands.join(" ")}`);
    assert.ok(top.commands.includes("completion"), "--help does not list completion");

    // Every command path and its help, walked from the top.
    const paths: string[][] = top.commands.filter((c) => c !== "help").map((c) => [c]);
    const helps: Array<ReturnType<typeof parseHelp>> = [];
    for (let i = 0; i < paths.length; i++) {
      const path = paths[i] ?? [];
      const help = parseHelp(await helpOf(path));
      helps.push(help);
      for (const sub of help.commands) if (sub !== "help") paths.push([...path, sub]);
    }
    assert.ok(
      paths.some((p) => p.join(" ") === "catalog apply"),
      "no nested command was reached (catalog apply)",
    );

    const [offered = [], topFlags = [], ...answers] = completeAll([
      ["llmgw", ""],
      ["llmgw", "-"],
      ...paths.flatMap((path) => [
        ["llmgw", ...path, ""],
        ["llmgw", ...path, "-"],
      ]),
    ]);
    for (const c of top.commands) assert.ok(offered.includes(c), `bash completion does not offer ${c}`);
    assert.deepEqual(topFlags.sort(), [...top.flags].sort(), "top-level flags differ from --help");
    paths.forEach((path, i) => {
      const help = helps[i] ?? { commands: [], flags: [] };
      const words = answers[2 * i] ?? [];
      for (const sub of help.commands)
        assert.ok(words.includes(sub), `llmgw ${path.join(" ")} <Tab> does not offer ${sub}`);
      assert.deepEqual(
        (answers[2 * i + 1] ?? []).sort(),
        [...help.flags].sort(),
        `llmgw ${path.join(" ")} -<Tab>: flags differ from its --help`,
      );
    });
  });

  it("the help compared above is what real `llmgw … --help` processes print", async () => {
    // The top, a command, a nested command and commands with added help texts.
    const samples = [[], ["gateway"], ["catalog", "apply"], ["nats-auth", "init"], ["scale"], ["cordon"]];
    const real = await Promise.all(samples.map((path) => runCli([...path, "--help"])));
    for (const [i, path] of samples.entries()) {
      const r = real[i];
      assert.equal(r?.code, 0, r?.stderr);
      assert.equal(r?.stderr, "");
      assert.equal(r?.stdout, await helpOf(path), `llmgw ${path.join(" ")} --help`);
    }
  });

  it("completes a prefix, an option's choices, and the shells; leaves free values to file names", () => {
    assert.deepEqual(complete("llmgw", "ca"), ["catalog"]);
    assert.deepEqual(complete("llmgw", "catalog", "ap"), ["apply"]);
    assert.deepEqual(complete("llmgw", "api", "--log-level", ""), [
      "trace",
      "debug",
      "info",
      "warn",
      "error",
      "silent",
    ]);
    assert.deepEqual(complete("llmgw", "reconciler", "--policy", "s"), ["spread"]);
    assert.deepEqual(complete("llmgw", "completion", "").slice(0, 3), ["bash", "zsh", "fish"]);
    // A value after --nats has no fixed list: nothing offered, bash falls back to file names.
    assert.deepEqual(complete("llmgw", "gateway", "--nats", ""), []);
    assert.deepEqual(complete("llmgw", "gateway", "--nats", "nats://x", "--stream-r"), ["--stream-replicas"]);
  });

  it("prints zsh and fish scripts naming every command, and refuses another shell naming the argument", async () => {
    const top = parseHelp(await helpOf([]));
    const [zsh, fish, bad] = await Promise.all([
      runCli(["completion", "zsh"]),
      runCli(["completion", "fish"]),
      runCli(["completion", "tcsh"]),
    ]);
    assert.equal(zsh.code, 0, zsh.stderr);
    assert.match(zsh.stdout, /bashcompinit/);
    assert.match(zsh.stdout, /complete -o bashdefault -o default -F _llmgw llmgw/);
    assert.equal(fish.code, 0, fish.stderr);
    for (const c of top.commands) {
      assert.match(fish.stdout, new RegExp(`-n '__fish_use_subcommand' -a '${c}'`), `fish script lacks ${c}`);
    }
    assert.match(
      fish.stdout,
      /-n '__fish_seen_subcommand_from catalog; and not __fish_seen_subcommand_from apply get history help' -a 'apply'/,
    );
    assert.match(
      fish.stdout,
      /-n '__fish_seen_subcommand_from api' -l log-level -x -a 'trace debug info warn error silent'/,
    );

    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /'tcsh' is invalid for argument 'shell'.*bash, zsh, fish/);
  });
});
