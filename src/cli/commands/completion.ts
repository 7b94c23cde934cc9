/**
 * `llmgw completion bash|zsh|fish`: prints a completion script generated
 * from this very program (src/cli/completion.ts), so it never drifts from the
 * commands and flags that exist.
 */
import { Argument, type Command } from "commander";
import { completionScript, completionTree, SHELLS, type Shell } from "../completion.js";

export function registerCompletion(program: Command): void {
  program
    .command("completion")
    .description("print a shell completion script: source <(llmgw completion bash), or zsh; fish: | source")
    .addArgument(new Argument("<shell>", "the shell").choices(SHELLS))
    .action((shell: Shell) => {
      process.stdout.write(completionScript(shell, completionTree(program)));
    });
}
