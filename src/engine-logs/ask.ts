/**
 * The API's side of one engine-log request (subjects.ts, wire.ts): asks
 * the gateway that holds the node's stream, waits for it to accept, then
 * hands over the output as it comes, saying every KEEP_EVERY_MS that its
 * client is still there; `close()` cancels it at the gateway (and so at the
 * agent).
 */
import { randomUUID } from "node:crypto";
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { PushQueue } from "../async/push-queue.js";
import type { EngineLogSubjects } from "./subjects.js";
import {
  type EngineLogAsk,
  type EngineLogEnd,
  engineLogEndSchema,
  KEEP_EVERY_MS,
  REPLY_KIND_HEADER,
} from "./wire.js";

export type LogPiece = { kind: "data"; data: Uint8Array } | ({ kind: "end" } & EngineLogEnd);

export type AskOutcome =
  | { ok: true; pieces: AsyncIterable<LogPiece>; close: () => void }
  | { ok: false; end: EngineLogEnd["end"] | "no-gateway" | "timeout"; error: string };

export interface AskOptions {
  nc: NatsConnection;
  subjects: EngineLogSubjects;
  gatewayId: string;
  ask: Omit<EngineLogAsk, "requestId">;
  /** How long the gateway has to accept (default 5 s). */
  acceptTimeoutMs?: number;
}

export async function askEngineLog(o: AskOptions): Promise<AskOutcome> {
  const requestId = randomUUID();
  const reply = o.subjects.reply(requestId);
  const queue = new PushQueue<LogPiece>();
  let accepted: (r: AskOutcome) => void = () => {};
  const first = new Promise<AskOutcome>((resolve) => {
    accepted = resolve;
  });
  let started = false;
  let ended = false;
  const encoder = new TextEncoder();
  const control = (op: "keep" | "cancel") => {
    try {
      o.nc.publish(o.subjects.control(o.gatewayId), encoder.encode(JSON.stringify({ requestId, op })));
    } catch {
      // The connection is closing: the gateway's keep expiry ends the request.
    }
  };
  let keep: NodeJS.Timeout | undefined;
  const finish = () => {
    if (ended) return;
    ended = true;
    clearInterval(keep);
    sub.unsubscribe();
    queue.end();
  };
  const close = () => {
    if (!ended) control("cancel");
    finish();
  };
  const onEnd = (m: Msg): EngineLogEnd => {
    try {
      return engineLogEndSchema.parse(m.json());
    } catch {
      return { end: "failed", error: "the gateway's answer did not parse" };
    }
  };
  const sub = o.nc.subscribe(reply, {
    callback: (err, m) => {
      if (err || ended) return;
      const kind = m.headers?.get(REPLY_KIND_HEADER) ?? "";
      if (!started) {
        if (kind === "accepted") {
          started = true;
          keep = setInterval(() => control("keep"), KEEP_EVERY_MS);
          accepted({ ok: true, pieces: queue, close });
          return;
        }
        const r: AskOutcome =
          kind === "end"
            ? { ok: false, ...onEnd(m) }
            : m.headers?.code === 503
              ? {
                  ok: false,
                  end: "no-gateway",
                  error: `gateway ${o.gatewayId} does not answer (no subscriber)`,
                }
              : { ok: false, end: "failed", error: "the gateway's answer did not parse" };
        finish();
        accepted(r);
        return;
      }
      if (kind === "data") queue.push({ kind: "data", data: m.data });
      else if (kind === "end") {
        queue.push({ kind: "end", ...onEnd(m) });
        finish();
      }
    },
  });
  const data: EngineLogAsk = { requestId, ...o.ask };
  o.nc.publish(o.subjects.ask(o.gatewayId), encoder.encode(JSON.stringify(data)), { reply });
  const timeoutMs = o.acceptTimeoutMs ?? 5_000;
  const timer = setTimeout(() => {
    if (started || ended) return;
    finish();
    accepted({
      ok: false,
      end: "timeout",
      error: `gateway ${o.gatewayId} did not answer within ${timeoutMs} ms`,
    });
  }, timeoutMs);
  const r = await first;
  clearTimeout(timer);
  return r;
}
