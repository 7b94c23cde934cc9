import { Command, CommanderError, Option } from "commander";
import { LogError } from "../log/index.js";
import { registerApi } from "./commands/api.js";
import { registerBench } from "./commands/bench.js";
import { registerCatalog } from "./commands/catalog.js";
import { registerCerts } from "./commands/certs.js";
import { registerCheckLog } from "./commands/check-log.js";
import { registerCompletion } from "./commands/completion.js";
import { registerDev } from "./commands/dev.js";
import { registerEvents } from "./commands/events.js";
import { registerExplain } from "./commands/explain.js";
import { registerGateway } from "./commands/gateway.js";
import { registerNodeIntent } from "./commands/node-intent.js";
import { registerNodes } from "./commands/nodes.js";
import { registerReconciler } from "./commands/reconciler.js";
import { registerReplay } from "./commands/replay.js";
import { registerReplicas } from "./commands/replicas.js";
import { registerSim } from "./commands/sim.js";
import { registerWhatIf } from "./commands/what-if.js";
import { CliError, EXIT } from "./common.js";
import { applyConfigFile } from "./config-file.js";

const program = new Command("llmgw")
  .description(
    "Control plane of an LLM-serving GPU fleet, event-sourced on NATS JetStream.\n" +
      "Every command that talks to NATS takes --nats URL (env LLMGW_NATS_URL, default nats://127.0.0.1:4222).\n" +
      "Settings come from --config-file (YAML/JSON; keys are flags in camelCase, per command section), then\n" +
      "the environment, then flags: each overrides the one before.",
  )
  .addOption(
    new Option("--config-file <file>", "configuration file for any command (see docs/configuration.md)").env(
      "LLMGW_CONFIG_FILE",
    ),
  )
  .hook("preAction", (_program, actionCommand) => {
    applyConfigFile(program, actionCommand, program.opts<{ configFile?: string }>().configFile);
  })
  .version("0.1.0")
  .showHelpAfterError()
  .exitOverride();

// Processes
registerDev(program);
registerGateway(program);
registerReconciler(program);
registerApi(program);
registerSim(program);
registerCerts(program);
// Reading the log
registerEvents(program);
registerReplay(program);
registerExplain(program);
registerWhatIf(program);
registerCheckLog(program);
// Operating
registerNodes(program);
registerReplicas(program);
registerCatalog(program);
registerNodeIntent(program, "cordon");
registerNodeIntent(program, "uncordon");
registerNodeIntent(program, "drain");
registerBench(program);
registerCompletion(program);

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
