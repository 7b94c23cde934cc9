// One projection restart in a process of its own, so its RSS is its own:
// argv url, stream, snapshot bucket ("" = full replay). Reports over IPC.
import { restartOnce } from "../scenarios/replay.js";

const [url, stream, bucket] = process.argv.slice(2);
const r = await restartOnce(url ?? "", stream ?? "", bucket ?? "");
process.send?.(r, () => process.exit(0));
