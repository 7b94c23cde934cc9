/**
 * Re-records the golden log and its expected replay. Run it only when you
 * mean to change what every future version must replay: the recorded bytes
 * stand for events written by versions already deployed.
 *
 *   node --import tsx test/support/record-golden-log.ts --confirm-new-golden-log [--replay-only]
 *
 * It writes test/fixtures/golden-log.bin from the builder in golden-log.ts,
 * appends it to a fresh stream on a nats-server it starts, runs
 * `llmgw replay --json` and stores the result (stream times masked) as
 * test/fixtures/golden-replay.json. Review both diffs before committing.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../harness/nats.js";
import { runCli } from "./cli.js";
import {
  appendRaw,
  buildGoldenLog,
  encodeFixture,
  FIXTURES,
  GOLDEN_LOG,
  GOLDEN_REPLAY,
  maskStreamTimes,
  readGoldenLog,
} from "./golden-log.js";

if (!process.argv.includes("--confirm-new-golden-log")) {
  console.error(
    "This replaces the golden log that every later version must replay.\n" +
      "Pass --confirm-new-golden-log if that is what you mean to do (see test/fixtures/README.md).",
  );
  process.exit(2);
}

mkdirSync(FIXTURES, { recursive: true });
// --replay-only keeps the recorded events and re-records what they replay to.
if (!process.argv.includes("--replay-only")) writeFileSync(GOLDEN_LOG, encodeFixture(buildGoldenLog()));
const server = await startServer();
try {
  const stream = uniqueStream("GOLDEN");
  const log = await openLog({ url: server.url, clientName: "record-golden", name: stream });
  try {
    const last = await appendRaw(log, readGoldenLog());
    const r = await runCli(["replay", "--json", "--nats", server.url, "--stream", stream]);
    if (r.code !== 0) throw new Error(`replay failed (${r.code}): ${r.stderr}`);
    writeFileSync(GOLDEN_REPLAY, `${JSON.stringify(maskStreamTimes(JSON.parse(r.stdout)), null, 2)}\n`);
    console.log(`recorded ${last} events to ${GOLDEN_LOG} and their replay to ${GOLDEN_REPLAY}`);
  } finally {
    await log.close();
  }
} finally {
  await server.close();
}
