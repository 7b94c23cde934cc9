import type { Command } from "commander";
import { CliError } from "../common.js";

/**
 * Registers a command that is part of llmgw's surface but not built yet. It
 * says so and exits 2 instead of pretending to work.
 */
export function registerNotBuilt(program: Command, name: string, summary: string, issue: string): void {
  program
    .command(name)
    .description(`${summary} (not built yet)`)
    .allowUnknownOption()
    .allowExcessArguments()
    .action(() => {
      throw new CliError(`llmgw ${name} is not built yet (${issue}); nothing was done`);
    });
}
