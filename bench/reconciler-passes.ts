/**
 * How many fenced reconcile passes per second the log takes, against a raw
 * JetStream publish of the same bytes in the same run (no assertions).
 *
 * - raw publish: `js.publish` of the encoded pass, each awaited;
 * - fenced append: `Log.append` with `expectLastSubjectSeq` chained to the
 *   previous pass, each awaited (what a leader does, without folding);
 * - fenced pass + fold: the same, then `waitFor` on a projection runtime
 *   following the log, as the runner does before its next pass.
 *
 * Run: node --import tsx bench/reconciler-passes.ts [seconds per case, default 3]
 * Uses LLMGW_NATS_URL when set, otherwise starts a nats-server of its own.
 */
import { create } from "@bufbuild/protobuf";
import { encodeEvent } from "../src/codec/index.js";
import { EventSchema } from "../src/gen/llmgw/v1/events_pb.js";
import { openLog } from "../src/log/index.js";
import { fleetProjection } from "../src/projections/index.js";
import { ProjectionRuntime } from "../src/projections/runtime/index.js";
import { startServer, uniqueStream } from "../test/harness/nats.js";
import { sampleEvents } from "../test/support/sample-events.js";

const seconds = Number(process.argv[2] ?? 3);
const server = process.env["LLMGW_NATS_URL"] ? undefined : await startServer();
const url = process.env["LLMGW_NATS_URL"] ?? server!.url;
const log = await openLog({ url, clientName: "bench", name: uniqueStream("BENCH"), prefix: "bench.evt" });
const template = sampleEvents().find((e) => e.body.case === "reconcilePass")!;
let n = 0;
const pass = () => create(EventSchema, { ...template, id: `bench-pass-${n++}` });
const bytes = encodeEvent(pass()).length;

async function measure(name: string, step: () => Promise<void>): Promise<number> {
  for (let i = 0; i < 50; i++) await step(); // warm-up
  const start = performance.now();
  let count = 0;
  while (performance.now() - start < seconds * 1000) {
    await step();
    count++;
  }
  const rate = count / ((performance.now() - start) / 1000);
  console.log(`${name.padEnd(24)} ${rate.toFixed(0).padStart(7)} /s  (${count} in ${seconds} s)`);
  return rate;
}

try {
  console.log(`pass size ${bytes} bytes, one publisher, each append awaited`);
  const rawSubject = "bench.evt.raw";
  const raw = await measure("raw JetStream publish", async () => {
    await log.js.publish(rawSubject, encodeEvent(pass()), { msgID: `raw-${n}` });
  });
  let last = await log.lastSubjectSeq(log.subjects.reconciler);
  const fenced = await measure("fenced append", async () => {
    last = (await log.append(pass(), { expectLastSubjectSeq: last })).seq;
  });
  const rt = new ProjectionRuntime(log, fleetProjection);
  await rt.start();
  const folded = await measure("fenced append + fold", async () => {
    const seq = (await log.append(pass(), { expectLastSubjectSeq: rt.state.replicas.lastPass?.seq ?? 0 }))
      .seq;
    await rt.waitFor(seq);
  });
  await rt.stop();
  console.log(
    `fenced append is ${((fenced / raw) * 100).toFixed(0)}% of raw; with the fold ${((folded / raw) * 100).toFixed(0)}%`,
  );
} finally {
  await log.jsm.streams.delete(log.stream).catch(() => {});
  await log.close();
  await server?.close();
}
