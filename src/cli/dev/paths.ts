/** Where `llmgw dev` keeps things by default, shared with the commands that find its NATS credentials. */
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../package-root.js";

export const DEFAULT_DEV_DATA_DIR = join(PACKAGE_ROOT, ".data/dev");

/** The NATS credentials of a dev fleet: auth.conf and one <role>.nk (NKEY seed) per role. */
export function devCredsDir(dataDir: string): string {
  return join(dataDir, "creds");
}
