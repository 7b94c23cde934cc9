/**
 * grpc.health.v1.Health on the agent port: SERVING while the gateway serves
 * and is connected to NATS (its `readiness()`), NOT_SERVING while it starts,
 * drains or has lost NATS. The names it knows are "" (the server) and
 * llmgw.v1.AgentService; Check of another is NotFound, Watch of another
 * says SERVICE_UNKNOWN, as the protocol asks.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type Health,
  type HealthCheckRequest,
  type HealthCheckResponse,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "../gen/grpc/health/v1/health_pb.js";
import { AgentService } from "../gen/llmgw/v1/agent_pb.js";

export interface HealthSource {
  /** Serving now. */
  serving(): boolean;
  /** Calls `listener` when serving may have changed; returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}

/** Besides the changes the source reports, Watch looks again this often (a NATS connection drops without a call). */
const WATCH_RECHECK_MS = 1000;

const KNOWN = new Set(["", AgentService.typeName]);

export function healthService(source: HealthSource): ServiceImpl<typeof Health> {
  const status = () => (source.serving() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  const answer = (s: ServingStatus): HealthCheckResponse => create(HealthCheckResponseSchema, { status: s });
  return {
    check(req: HealthCheckRequest): HealthCheckResponse {
      if (!KNOWN.has(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return answer(status());
    },
    async *watch(req: HealthCheckRequest, ctx: HandlerContext): AsyncGenerator<HealthCheckResponse> {
      if (!KNOWN.has(req.service)) {
        yield answer(ServingStatus.SERVICE_UNKNOWN);
        // The protocol keeps the stream open: the service could appear later (here it does not).
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
        return;
      }
      let wake: (() => void) | undefined;
      const nudge = () => wake?.();
      const unsubscribe = source.onChange(nudge);
      const timer = setInterval(nudge, WATCH_RECHECK_MS);
      ctx.signal.addEventListener("abort", nudge);
      try {
        let last: ServingStatus | undefined;
        while (!ctx.signal.aborted) {
          const now = status();
          if (now !== last) {
            last = now;
            yield answer(now);
          }
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
      } finally {
        unsubscribe();
        clearInterval(timer);
      }
    },
  };
}
