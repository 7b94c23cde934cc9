/**
 * Records the golden log of every fleet-schema version and what the
 * current code replays it to. Run it when a new schema version is released
 * (add its commit to SCHEMA_COMMITS first); never to make a failing test
 * pass (test/fixtures/README.md).
 *
 *   node --import tsx test/support/record-schema-golden-logs.ts --confirm-new-golden-log [--replay-only]
 *
 * For each version it exports that commit of this repository (old-release.ts)
 * and runs there, with that version's own code, its golden-log builder
 * followed by its sample of every event kind it knew, into
 * test/fixtures/golden-logs/fleet-schema-N.bin. Then the current code
 * appends each recording to a fresh stream on a nats-server it starts, runs
 * `llmgw replay --json` and stores the result (stream times masked) as
 * fleet-schema-N.replay.json. `--replay-only` keeps the recordings.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../harness/nats.js";
import { runCli } from "./cli.js";
import { appendRaw, decodeFixture, maskStreamTimes } from "./golden-log.js";
import { exportRelease, SCHEMA_COMMITS } from "./old-release.js";
import { SCHEMA_GOLDEN_DIR, schemaGoldenLog, schemaGoldenReplay } from "./schema-golden-logs.js";

if (!process.argv.includes("--confirm-new-golden-log")) {
  console.error(
    "This replaces the golden logs of every fleet-schema version.\n" +
      "Pass --confirm-new-golden-log if that is what you mean to do (see test/fixtures/README.md).",
  );
  process.exit(2);
}

/** Run inside the exported version, with its own modules: its builder, its samples, its encoder. */
const RECORDER = `
import { writeFileSync } from "node:fs";
import { toBinary } from "@bufbuild/protobuf";
import { EventSchema } from "./src/gen/llmgw/v1/events_pb.js";
import { Subjects, subjectFor } from "./src/log/index.js";
import { buildGoldenLog, encodeFixture } from "./test/support/golden-log.js";
import { sampleEvents } from "./test/support/sample-events.js";
const rel = new Subjects("x");
const samples = sampleEvents().map((e) => ({
  subject: subjectFor(rel, e).slice(rel.prefix.length + 1),
  data: toBinary(EventSchema, e),
}));
writeFileSync(process.argv[2], encodeFixture([...buildGoldenLog(), ...samples]));
`;

mkdirSync(SCHEMA_GOLDEN_DIR, { recursive: true });
if (!process.argv.includes("--replay-only")) {
  for (const { schema, commit } of SCHEMA_COMMITS) {
    // The oldest versions ran on other dependencies; their builder needs only
    // the protobuf runtime, whose wire format does not change.
    const release = exportRelease(commit, { requireSameLock: false });
    try {
      const script = join(release.dir, "record-schema-golden-log.ts");
      writeFileSync(script, RECORDER);
      execFileSync(process.execPath, ["--import", "tsx", script, schemaGoldenLog(schema)], {
        cwd: release.dir,
        stdio: ["ignore", "inherit", "inherit"],
      });
      console.log(`fleet schema ${schema}: recorded by ${commit}`);
    } finally {
      release.remove();
    }
  }
}

const server = await startServer();
try {
  for (const { schema } of SCHEMA_COMMITS) {
    const stream = uniqueStream(`GOLDEN${schema}`);
    const log = await openLog({ url: server.url, clientName: "record-schema-golden", name: stream });
    try {
      const last = await appendRaw(log, decodeFixture(readFileSync(schemaGoldenLog(schema))));
      const r = await runCli(["replay", "--json", "--nats", server.url, "--stream", stream]);
      if (r.code !== 0) throw new Error(`replay of fleet schema ${schema} failed (${r.code}): ${r.stderr}`);
      writeFileSync(
        schemaGoldenReplay(schema),
        `${JSON.stringify(maskStreamTimes(JSON.parse(r.stdout)), null, 2)}\n`,
      );
      console.log(`fleet schema ${schema}: ${last} events replayed to ${schemaGoldenReplay(schema)}`);
    } finally {
      // Every stream takes the default prefix: one at a time.
      await log.jsm.streams.delete(stream);
      await log.close();
    }
  }
} finally {
  await server.close();
}
