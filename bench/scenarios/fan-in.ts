import type { Scenario } from "../support/result.js";

export const fanIn: Scenario = {
  name: "fan-in",
  describe: "",
  async run() {
    throw new Error("not built");
  },
};
