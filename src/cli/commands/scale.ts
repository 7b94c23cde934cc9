/** `llmgw scale MODEL N`: change one model's replica count (a catalog change, applied by the API). */
import type { Command } from "commander";
import { CliError, EXIT, intArg } from "../common.js";
import { type ApiFlags, call, clientFor, printJson, withApiOptions } from "./operator-common.js";

export function registerScale(program: Command): void {
  withApiOptions(
    program
      .command("scale")
      .description("set how many replicas a model wants (needs an admin token: it changes the catalog)")
      .argument("<model>", "a model of the catalog")
      .argument("<replicas>", "the replica count wanted, 0 to serve nothing", intArg("<replicas>"))
      .option(
        "--if-match <seq>",
        "apply only if the catalog in force is still at this sequence",
        intArg("--if-match"),
      )
      .addHelpText(
        "after",
        "\nScale-up creates replicas that are placed and started; scale-down takes the newest\nreplicas out of the routing table first, then drains them. `llmgw replicas --model M` shows progress.",
      ),
  ).action(async (model: string, replicas: number, flags: ApiFlags & { ifMatch?: number }) => {
    if (model === "") throw new CliError("<model> must name a model of the catalog", EXIT.usage);
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.send((api) =>
        api.PATCH("/v1/models/{model}", {
          params: {
            path: { model },
            header: flags.ifMatch === undefined ? {} : { "If-Match": `"${flags.ifMatch}"` },
          },
          body: { replicas },
        }),
      ),
    );
    if (flags.json) return printJson(body);
    process.stdout.write(
      `${body.model} scaled from ${body.previous} to ${body.replicas} replica(s) (catalog at log sequence ${body.seq})\n`,
    );
  });
}
