/**
 * `llmgw completion`: the bash script is sourced into a real bash and asked
 * to complete, the way bash does on Tab; what it offers is compared with what
 * every command's own --help lists (commands, subcommands, flags).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
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

  /** What bash offers on Tab after `words` (the last one is being typed). */
  function complete(...words: string[]): string[] {
    const quoted = words.map((w) => `'${w}'`).join(" ");
    const r = spawnSync(
      "bash",
      [
        "-c",
        `source "$1"; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _llmgw; printf '%s\\n' "\${COMPREPLY[@]}"`,
        "bash",
        script,
      ],
      { encoding: "utf8" },
    );
    assert.equal(r.status, 0, `bash failed completing ${words.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, "", `bash complained completing ${words.join(" ")}`);
    return r.stdout.split("\n").filter((w) => w !== "");
  }

  it("offers every command --help lists, and every subcommand and flag of each", async () => {
    const top = parseHelp((await runCli(["--help"])).stdout);
    assert.ok(top.commands.length >= 20, `too few commands parsed from --help: ${top.commands.join(" ")}`);
    assert.ok(top.commands.includes("completion"), "--help does not list completion");
    const offered = complete("llmgw", "");
    for (const c of top.commands) assert.ok(offered.includes(c), `bash completion does not offer ${c}`);
    assert.deepEqual(
      complete("llmgw", "-").sort(),
      [...top.flags].sort(),
      "top-level flags differ from --help",
    );

    const paths: string[][] = top.commands.filter((c) => c !== "help").map((c) => [c]);
    for (let i = 0; i < paths.length; i++) {
      const path = paths[i] ?? [];
      const help = parseHelp((await runCli([...path, "--help"])).stdout);
      const words = complete("llmgw", ...path, "");
      for (const sub of help.commands) {
        assert.ok(words.includes(sub), `llmgw ${path.join(" ")} <Tab> does not offer ${sub}`);
        if (sub !== "help") paths.push([...path, sub]);
      }
      assert.deepEqual(
        complete("llmgw", ...path, "-").sort(),
        [...help.flags].sort(),
        `llmgw ${path.join(" ")} -<Tab>: flags differ from its --help`,
      );
    }
    assert.ok(
      paths.some((p) => p.join(" ") === "catalog apply"),
      "no nested command was reached (catalog apply)",
    );
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
    const top = parseHelp((await runCli(["--help"])).stdout);
    const zsh = await runCli(["completion", "zsh"]);
    assert.equal(zsh.code, 0, zsh.stderr);
    assert.match(zsh.stdout, /bashcompinit/);
    assert.match(zsh.stdout, /complete -o bashdefault -o default -F _llmgw llmgw/);
    const fish = await runCli(["completion", "fish"]);
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

    const bad = await runCli(["completion", "tcsh"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /'tcsh' is invalid for argument 'shell'.*bash, zsh, fish/);
  });
});
