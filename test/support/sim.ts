/** Helpers for tests of simulated agents against the fake gateway. */
import type { Heartbeat, ShardStatus } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type SimConfigInput, SimFleet } from "../../src/sim/index.js";
import { type AgentStream, FakeGateway, waitFor } from "./fake-gateway.js";

/** Fast timings for tests; assertions wait for conditions, never for durations. */
export const FAST: SimConfigInput = {
  insecureDev: true,
  heartbeatMs: 50,
  startDelayMs: 150,
  drainMs: 100,
  failAfterMs: 100,
  crashAfterMs: 150,
  reconnectMinMs: 50,
  reconnectMaxMs: 200,
  seed: 7,
};

/** A fleet on one h2c fake gateway; both are closed whatever happens. */
export async function withFleet(
  config: SimConfigInput,
  fn: (fleet: SimFleet, gw: FakeGateway) => Promise<void>,
): Promise<void> {
  const gw = await FakeGateway.start();
  let fleet: SimFleet | undefined;
  try {
    fleet = new SimFleet({ ...FAST, gateways: [gw.url], ...config });
    await fleet.start();
    await fn(fleet, gw);
  } finally {
    await fleet?.stop();
    await gw.close();
  }
}

export const statuses = (s: AgentStream, shardId?: string): ShardStatus[] =>
  s.messages.flatMap((m) =>
    m.msg.case === "shard" && (shardId === undefined || m.msg.value.shardId === shardId) ? [m.msg.value] : [],
  );

export const results = (s: AgentStream) =>
  s.messages.flatMap((m) => (m.msg.case === "result" ? [m.msg.value] : []));

export const heartbeats = (s: AgentStream, from = 0): Heartbeat[] =>
  s.messages.slice(from).flatMap((m) => (m.msg.case === "heartbeat" ? [m.msg.value] : []));

/** The first heartbeat sent after the stream's `from`-th message. */
export const nextHeartbeat = (s: AgentStream, from = s.messages.length) =>
  waitFor(`a heartbeat from ${s.nodeId}`, () => heartbeats(s, from)[0]);

/** The node's latest stream, once its registration arrived. */
export function registered(gw: FakeGateway, nodeId: string): Promise<AgentStream> {
  return waitFor(`a registration from ${nodeId}`, () => {
    const s = gw.latest(nodeId);
    return s?.register ? s : undefined;
  });
}
