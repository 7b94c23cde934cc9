import { CommanderError } from "commander";
import { LogError } from "../log/index.js";
import { CliError, EXIT } from "./common.js";
import { buildProgram } from "./program.js";

const program = buildProgram();

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitCodeFor(err);
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    // Commander already printed the message (and the help for usage errors).
    return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  if (err instanceof CliError) {
    process.stderr.write(`llmgw: ${err.message}\n`);
    return err.exitCode;
  }
  if (err instanceof LogError) {
    process.stderr.write(`llmgw: ${err.message}\n`);
    return EXIT.failure;
  }
  process.stderr.write(`llmgw: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return EXIT.failure;
}
