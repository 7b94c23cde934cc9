import type { Scenario } from "../support/result.js";

export const convergence: Scenario = {
  name: "convergence",
  describe: "",
  async run() {
    throw new Error("not built");
  },
};
