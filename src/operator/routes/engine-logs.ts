/**
 * GET /v1/logs/:id — an engine's output (`llmgw logs`), streamed as
 * server-sent events: `output` (the text, JSON-encoded, terminal escapes
 * removed) as it comes, then one `end` ({end, error}). The API asks the
 * gateway that holds the node's stream over core NATS (src/engine-logs),
 * which asks the agent; nothing of it goes into the log. What is wrong
 * before anything is streamed is an ordinary error: no such replica or
 * shard (404), the node gone (410), its agent or gateway not reachable (503).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { askEngineLog, EngineLogSubjects, MAX_TAIL_LINES, printable } from "../../engine-logs/index.js";
import type { FleetState } from "../../projections/index.js";
import type { ApiContext } from "../context.js";
import { ApiError } from "../errors.js";
import { parseWith, replicaIdParam } from "./params.js";

export const engineLogsQuery = z.strictObject({
  follow: z.enum(["true", "false"]).optional(),
  tail: z.coerce.number().int().min(0).max(MAX_TAIL_LINES, `must be at most ${MAX_TAIL_LINES}`).optional(),
});

/** Bytes waiting for a slow client past this: the request ends rather than the API buffer. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
const KEEPALIVE_MS = 15_000;

export interface LogTarget {
  replicaId: string;
  shardId: string;
  nodeId: string;
  gatewayId: string;
}

/** A shard and the node it is (or was last) on. */
interface ShardOnNode {
  replicaId: string;
  shardId: string;
  nodeId: string;
}

/**
 * Which shard `id` names (a replica: its first shard) and its node: from
 * the fleet now, else (a replica waiting to be placed again, or a replica
 * or shard removed, e.g. after its node was lost) from the last status the
 * log has of it, so that its node can say it is gone, or its agent send
 * the logs it keeps for a while.
 */
export async function findShard(ctx: ApiContext, id: string): Promise<ShardOnNode> {
  const s = ctx.runtime.state;
  const replica = s.replicas.replicas.get(id);
  const first = replica?.shards[0];
  if (first) return { replicaId: id, shardId: first.shardId, nodeId: first.nodeId };
  for (const r of s.replicas.replicas.values()) {
    const found = r.shards.find((x) => x.shardId === id);
    if (found) return { replicaId: r.replicaId, shardId: found.shardId, nodeId: found.nodeId };
  }
  let last: ShardOnNode | undefined;
  for await (const r of ctx.log.read({ untilSeq: s.seq, subjects: [`${ctx.log.subjects.prefix}.node.*`] })) {
    const b = r.event.body;
    if (b.case !== "shardStatus" || !b.value.status) continue;
    const st = b.value.status;
    if (st.replicaId === id || st.shardId === id)
      last = { replicaId: st.replicaId, shardId: st.shardId, nodeId: b.value.nodeId };
  }
  if (last) return last;
  if (replica)
    throw new ApiError(404, "not-found", `replica ${id} has not run on any node yet (it is pending)`);
  throw new ApiError(404, "not-found", `no replica or shard named ${id} (\`llmgw replicas\` lists them)`);
}

/** Where the agent of `shard`'s node holds its stream; an ApiError when it cannot be asked. */
export function logTarget(s: FleetState, shard: ShardOnNode): LogTarget {
  const { replicaId } = shard;
  const node = s.inventory.nodes.get(shard.nodeId);
  const where = `shard ${shard.shardId} of replica ${replicaId}`;
  if (!node)
    throw new ApiError(410, "gone", `node ${shard.nodeId} of ${where} is gone: it is no longer in the fleet`);
  if (node.liveness === "lost")
    throw new ApiError(
      410,
      "gone",
      `node ${node.nodeId} of ${where} is gone: lost${since(node.disconnectedSinceMs)}${closeReason(node.lastCloseReason)}`,
    );
  if (!node.session)
    throw new ApiError(
      503,
      "agent-unavailable",
      `the agent of node ${node.nodeId} (${where}) is not connected${since(node.disconnectedSinceMs)}${closeReason(node.lastCloseReason)}`,
    );
  return { replicaId, shardId: shard.shardId, nodeId: node.nodeId, gatewayId: node.session.gatewayId };
}

const since = (ms: number | null) => (ms === null ? "" : ` since ${new Date(ms).toISOString()}`);
const closeReason = (r: string) => (r === "" ? "" : ` (its last session ended: ${r})`);

export function engineLogRoutes(app: FastifyInstance, ctx: ApiContext): { closeAll(): void } {
  const subjects = new EngineLogSubjects(ctx.log.subjects.prefix);
  const open = new Set<() => void>();
  app.get("/v1/logs/:id", async (req, reply) => {
    const id = replicaIdParam(req.params);
    const q = parseWith(engineLogsQuery, req.query, "query");
    const target = logTarget(ctx.runtime.state, await findShard(ctx, id));
    const asked = await askEngineLog({
      nc: ctx.log.nc,
      subjects,
      gatewayId: target.gatewayId,
      ask: {
        nodeId: target.nodeId,
        shardId: target.shardId,
        tailLines: q.tail ?? MAX_TAIL_LINES,
        follow: q.follow === "true",
      },
    });
    if (!asked.ok) {
      const where = `node ${target.nodeId} (shard ${target.shardId})`;
      switch (asked.end) {
        case "not-found":
          throw new ApiError(404, "not-found", `${asked.error} (${where})`);
        default:
          // Not connected there, busy, no gateway, no answer in time: the agent cannot be asked now.
          throw new ApiError(503, "agent-unavailable", `${asked.error} (${where})`);
      }
    }
    req.log.info({ target, follow: q.follow === "true", tail: q.tail }, "engine log stream");
    stream(req, reply, target, asked, open);
  });
  return {
    closeAll() {
      for (const close of open) close();
      open.clear();
    },
  };
}

function stream(
  req: FastifyRequest,
  reply: FastifyReply,
  target: LogTarget,
  asked: Extract<Awaited<ReturnType<typeof askEngineLog>>, { ok: true }>,
  open: Set<() => void>,
): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
    "x-llmgw-replica": target.replicaId,
    "x-llmgw-shard": target.shardId,
    "x-llmgw-node": target.nodeId,
  });
  const write = (event: string, data: unknown) =>
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS);
  let done = false;
  const stop = () => {
    if (done) return;
    done = true;
    clearInterval(keepalive);
    open.delete(stop);
    // The client left (or the server closes): the gateway, and through it the agent, stop.
    asked.close();
    if (!res.writableEnded) res.end();
  };
  open.add(stop);
  req.raw.on("close", stop);
  res.on("close", stop);
  const decoder = new TextDecoder("utf-8");
  void (async () => {
    for await (const piece of asked.pieces) {
      if (done) return;
      if (piece.kind === "data") {
        const text = printable(decoder.decode(piece.data, { stream: true }));
        write("output", text);
        if (res.writableLength > MAX_BUFFERED_BYTES) {
          write("end", { end: "limit", error: "the client reads more slowly than the engine writes" });
          stop();
          return;
        }
        continue;
      }
      const rest = printable(decoder.decode());
      if (rest !== "") write("output", rest);
      write("end", { end: piece.end, error: printable(piece.error) });
      stop();
      return;
    }
    if (!done) {
      write("end", { end: "disconnected", error: "the gateway's answer ended" });
      stop();
    }
  })();
}
