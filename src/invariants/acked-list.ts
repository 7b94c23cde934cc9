/**
 * The agents' record of acknowledged messages, as `llmgw check-log --acked`
 * reads it: a JSON array of { nodeId, sessionId, messageId }, or the same
 * objects one per line (what an agent appends as acks arrive).
 */
import { z } from "zod";
import type { AckedMessage } from "./types.js";

const Acked = z.object({
  nodeId: z.string().min(1),
  sessionId: z.string().min(1),
  messageId: z.string().min(1),
});

export type AckedList = AckedMessage[];

/** Parses the text; throws an Error naming the entry and field that is wrong. */
export function parseAckedList(text: string): AckedList {
  const trimmed = text.trim();
  if (trimmed === "") return [];
  let items: unknown[];
  let where: (i: number) => string;
  if (trimmed.startsWith("[")) {
    try {
      items = JSON.parse(trimmed) as unknown[];
    } catch (err) {
      throw new Error(`not valid JSON: ${(err as Error).message}`);
    }
    where = (i) => `entry ${i}`;
  } else {
    const lines = trimmed.split("\n");
    items = lines.map((line, i) => {
      try {
        return JSON.parse(line) as unknown;
      } catch (err) {
        throw new Error(`line ${i + 1} is not valid JSON: ${(err as Error).message}`);
      }
    });
    where = (i) => `line ${i + 1}`;
  }
  return items.map((item, i) => {
    const r = Acked.safeParse(item);
    if (r.success) return r.data;
    const issue = r.error.issues[0];
    const field = issue?.path.join(".") || "(the entry)";
    throw new Error(
      `${where(i)}: ${field}: ${issue?.message ?? "invalid"} (expected { "nodeId", "sessionId", "messageId" } strings)`,
    );
  });
}
