/**
 * A long, realistic mix of events for a fleet of H100 nodes: sessions
 * opening and reopening, passes placing Llama 3.3 70B replicas with start
 * commands, shard statuses, usage changes, operator cordons. Deterministic:
 * the same options give the same events.
 */
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  command,
  decide,
  EventFactory,
  h100Node,
  llamaCatalog,
  SessionClosed_Reason,
  ShardStatus_State,
} from "./fleet-events.js";

export function* fleetChurn(opts: { nodes: number; events: number; prefix?: string }): Generator<Event> {
  const f = new EventFactory(opts.prefix ?? "churn");
  const sessions = new Map<string, string>();
  const node = (i: number) => `gpu-${String(i).padStart(4, "0")}`;
  const model = "llama-3.3-70b";
  let emitted = 0;
  const emit = function* (e: Event) {
    if (emitted >= opts.events) return;
    emitted++;
    yield e;
  };

  yield* emit(f.gatewayStarted("gw-1"));
  yield* emit(f.catalog(llamaCatalog(opts.nodes, 0)));
  for (let i = 0; i < opts.nodes && emitted < opts.events; i++) {
    sessions.set(node(i), `s-${i}-0`);
    yield* emit(f.sessionOpened(node(i), `s-${i}-0`, "gw-1", h100Node(node(i), { pod: `ib-pod-${i % 4}` })));
  }
  for (let round = 0; emitted < opts.events; round++) {
    const i = round % opts.nodes;
    const id = node(i);
    const session = sessions.get(id) as string;
    const half = round % 2;
    const gpus = half === 0 ? [0, 1, 2, 3] : [4, 5, 6, 7];
    const replica = `r-${round}`;
    const shard = `${replica}.0`;
    const s = { shard, replica, model, profile: "tp4", gpus };
    yield* emit(
      f.pass(
        [
          decide.created(replica, model),
          decide.placed(replica, model, "tp4", [{ shard, node: id, session, gpus }]),
        ],
        [command.start(`c-${round}`, id, session, s)],
      ),
    );
    yield* emit(f.commandResult(id, session, `c-${round}`));
    yield* emit(f.shardStatus(id, session, replica, shard, ShardStatus_State.STARTING));
    yield* emit(f.shardStatus(id, session, replica, shard, ShardStatus_State.RUNNING));
    yield* emit(
      f.usage(id, session, half === 0 ? [71, 71, 71, 71, 0, 0, 0, 0] : [71, 71, 71, 71, 71, 71, 71, 71]),
    );
    if (round >= 2 * opts.nodes) {
      // An old replica is scaled down, so the fleet stays bounded.
      const old = `r-${round - 2 * opts.nodes}`;
      yield* emit(
        f.pass([decide.removed(old, model)], [command.stop(`c-stop-${round}`, id, session, `${old}.0`)]),
      );
      yield* emit(f.commandResult(id, session, `c-stop-${round}`));
    }
    if (round % 97 === 13) {
      yield* emit(f.cordon(id, "firmware"));
      yield* emit(f.uncordon(id));
    }
    if (round % 61 === 7) {
      const next = `s-${i}-${round}`;
      yield* emit(f.sessionClosed(id, session, "gw-1", SessionClosed_Reason.DISCONNECTED));
      yield* emit(f.sessionOpened(id, next, "gw-1", h100Node(id, { pod: `ib-pod-${i % 4}` })));
      sessions.set(id, next);
    }
  }
}
