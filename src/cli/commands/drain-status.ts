/**
 * What a node's drain waits on, as `llmgw drain` prints it: each replica
 * still serving on the node and why it has not left (its replacement on its
 * way, or its model's disruption budget). `--wait` follows the API's live
 * position and prints the list again whenever it changes, until nothing of
 * the node is left.
 */
import type { ApiClient, NodeView } from "../../operator/index.js";
import { call } from "./operator-common.js";

export function drainWaitLines(node: NodeView): string {
  if (node.waitingOn.length === 0) {
    return node.replicaIds.length === 0
      ? `${node.nodeId}: nothing left on the node\n`
      : `${node.nodeId}: waits for ${node.replicaIds.length} replica(s) to finish draining: ${node.replicaIds.join(", ")}\n`;
  }
  const lines = node.waitingOn.map(
    (w) => `  ${w.replicaId} (${w.model})${w.blockedByBudget ? " [disruption budget]" : ""}: ${w.reason}\n`,
  );
  return `${node.nodeId} waits on ${node.waitingOn.length} replica(s):\n${lines.join("")}`;
}

/** True once a draining node holds nothing any more. */
export function drainDone(node: NodeView): boolean {
  return node.waitingOn.length === 0 && node.replicaIds.length === 0;
}

/** Prints the node's waits whenever they change, until the drain is done or `signal` aborts. */
export async function followDrain(
  client: ApiClient,
  nodeId: string,
  json: boolean,
  signal: AbortSignal,
): Promise<NodeView | undefined> {
  let last = "";
  return call(async () => {
    for await (const _ of client.followPosition(signal)) {
      const { body } = await client.send((api) =>
        api.GET("/v1/nodes/{id}", { params: { path: { id: nodeId } } }),
      );
      const text = json ? JSON.stringify(body.node.waitingOn) : drainWaitLines(body.node);
      if (text !== last) {
        last = text;
        process.stdout.write(
          json ? `${JSON.stringify({ seq: body.seq, node: body.node })}\n` : `seq ${body.seq} ${text}`,
        );
      }
      if (drainDone(body.node)) return body.node;
    }
    return undefined;
  });
}
