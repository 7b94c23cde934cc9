/**
 * The llmgw command with every subcommand registered, not yet parsed: main.ts
 * runs it, and tests read its commands and options (the deployment files
 * are checked against them).
 */
import { Command, Option } from "commander";
import { applyContext } from "./api-access.js";
import { registerAgent } from "./commands/agent.js";
import { registerApi } from "./commands/api.js";
import { registerArchiver } from "./commands/archiver.js";
import { registerBackup } from "./commands/backup.js";
import { registerBench } from "./commands/bench.js";
import { registerCatalog } from "./commands/catalog.js";
import { registerCerts } from "./commands/certs.js";
import { registerCheckLog } from "./commands/check-log.js";
import { registerCompletion } from "./commands/completion.js";
import { registerConfig } from "./commands/config.js";
import { registerDescribe } from "./commands/describe.js";
import { registerDev } from "./commands/dev.js";
import { registerEndpoints } from "./commands/endpoints.js";
import { registerEvents } from "./commands/events.js";
import { registerExplain } from "./commands/explain.js";
import { registerGateway } from "./commands/gateway.js";
import { registerGpu } from "./commands/gpu.js";
import { registerLogInfo } from "./commands/log-info.js";
import { registerLogs } from "./commands/logs.js";
import { registerNatsAuth } from "./commands/nats-auth.js";
import { registerNodeIntent } from "./commands/node-intent.js";
import { registerNodes } from "./commands/nodes.js";
import { registerReconciler } from "./commands/reconciler.js";
import { registerReplay } from "./commands/replay.js";
import { registerReplicas } from "./commands/replicas.js";
import { registerRevocation } from "./commands/revoke.js";
import { registerRollout } from "./commands/rollout.js";
import { registerRollouts } from "./commands/rollouts.js";
import { registerRouter } from "./commands/router.js";
import { registerScale } from "./commands/scale.js";
import { registerSim } from "./commands/sim.js";
import { registerSimulate } from "./commands/simulate.js";
import { registerWhatIf } from "./commands/what-if.js";
import { applyConfigFile } from "./config-file.js";

export function buildProgram(): Command {
  const program = new Command("llmgw")
    .description(
      "Control plane of an LLM-serving GPU fleet, event-sourced on NATS JetStream.\n" +
        "Every command that talks to NATS takes --nats URL (env LLMGW_NATS_URL, default nats://127.0.0.1:4222).\n" +
        "Operator commands, and events, replay, explain, what-if and check-log unless --nats is on the command line,\n" +
        "reach the operator API: --api/--token, then LLMGW_API_URL/LLMGW_API_TOKEN, then the current context (llmgw config).\n" +
        "Settings come from --config-file (YAML/JSON; keys are flags in camelCase, per command section), then\n" +
        "the environment, then flags: each overrides the one before.",
    )
    .addOption(
      new Option(
        "--config-file <file>",
        "configuration file for any command (see docs/configuration.md)",
      ).env("LLMGW_CONFIG_FILE"),
    )
    .hook("preAction", (_program, actionCommand) => {
      applyConfigFile(program, actionCommand, program.opts<{ configFile?: string }>().configFile);
      applyContext(actionCommand);
    })
    .version("0.1.0")
    .showHelpAfterError()
    .exitOverride();

  // Processes
  registerDev(program);
  registerGateway(program);
  registerReconciler(program);
  registerApi(program);
  registerRouter(program);
  registerSim(program);
  registerSimulate(program);
  registerAgent(program);
  registerArchiver(program);
  registerCerts(program);
  registerNatsAuth(program);
  // Reading the log
  registerEvents(program);
  registerReplay(program);
  registerExplain(program);
  registerWhatIf(program);
  registerCheckLog(program);
  registerLogInfo(program);
  registerBackup(program);
  // Operating
  registerNodes(program);
  registerReplicas(program);
  registerLogs(program);
  registerDescribe(program);
  registerEndpoints(program);
  registerCatalog(program);
  registerScale(program);
  registerRollout(program);
  registerRollouts(program);
  registerNodeIntent(program, "cordon");
  registerNodeIntent(program, "uncordon");
  registerNodeIntent(program, "drain");
  registerGpu(program);
  registerRevocation(program);
  registerConfig(program);
  registerBench(program);
  registerCompletion(program);
  return program;
}
