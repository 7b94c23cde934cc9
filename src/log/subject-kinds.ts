/**
 * Which subjects may carry which event kinds (docs/SECURITY.md, "Subject ↔
 * kind binding"). NATS permissions say who may publish to a subject; they
 * cannot look into the message. A role that may write one subject could
 * otherwise write any kind of event there (a gateway's `NodeCordoned` on a
 * node subject). So the one table below is used both ways: `subjectFor`
 * places an event by it when it is appended, and `subjectRefusal` refuses on
 * read an event stored anywhere else. Writing and reading cannot drift apart.
 *
 * Pure: no NATS, no I/O. Projections, the checker and tools may import it.
 */

import type { EventBody, EventKind } from "../codec/index.js";
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import type { NatsRole } from "../nats-auth/index.js";
import type { Subjects } from "./subjects.js";

/** The subject families of the log, one writer role each (see SUBJECT_WRITERS). */
export type SubjectFamily =
  | "session"
  | "node"
  | "gateway"
  | "catalog"
  | "operator"
  | "rollouts"
  | "reconciler";

type BodyOf<K extends EventKind> = Extract<EventBody, { case: K }>["value"];

/** Where one kind goes: its family and, for per-node and per-gateway families, the id that names the subject. */
export type SubjectRoute<V> =
  | { readonly family: "session" | "node" | "operator" | "gateway"; readonly id: (value: V) => string }
  | { readonly family: "catalog" | "rollouts" | "reconciler" };

const byNode = (v: { nodeId: string }) => v.nodeId;
const byGateway = (v: { gatewayId: string }) => v.gatewayId;

/** The routes the table is made of: a family, and for the per-node and per-gateway ones whose id names the subject. */
const SESSION = { family: "session", id: byNode } as const;
const NODE = { family: "node", id: byNode } as const;
const GATEWAY = { family: "gateway", id: byGateway } as const;
const OPERATOR = { family: "operator", id: byNode } as const;
const CATALOG = { family: "catalog" } as const;
const RECONCILER = { family: "reconciler" } as const;
const ROLLOUTS = { family: "rollouts" } as const;

/**
 * THE table: every event kind, the subject family it is written to and
 * read from, and the id in its body that names the subject. The type makes
 * it name every kind, so a kind added to the proto must be placed here.
 */
export const KIND_SUBJECTS: { readonly [K in EventKind]: SubjectRoute<BodyOf<K>> } = {
  sessionOpened: SESSION,
  sessionClosed: SESSION,
  duplicateIdentity: SESSION,
  hardwareChanged: NODE,
  usageChanged: NODE,
  shardStatus: NODE,
  commandResult: NODE,
  gatewayStarted: GATEWAY,
  gatewayDraining: GATEWAY,
  gatewayStopped: GATEWAY,
  commandUndeliverable: GATEWAY,
  catalogChanged: CATALOG,
  nodeCordoned: OPERATOR,
  nodeUncordoned: OPERATOR,
  nodeDrainRequested: OPERATOR,
  gpuProblemsCleared: OPERATOR,
  gpuCordoned: OPERATOR,
  gpuUncordoned: OPERATOR,
  reconcilePass: RECONCILER,
  rolloutPaused: ROLLOUTS,
  rolloutResumed: ROLLOUTS,
};

/** The role whose credentials may publish each family (src/nats-auth/permissions.ts grants exactly these). */
export const SUBJECT_WRITERS: {
  readonly [F in SubjectFamily]: Exclude<NatsRole, "reader" | "router" | "archiver">;
} = {
  session: "gateway",
  node: "gateway",
  gateway: "gateway",
  catalog: "api",
  operator: "api",
  rollouts: "api",
  reconciler: "reconciler",
};

/** The event kinds one family carries, in the order of the table. */
export function kindsOfFamily(family: SubjectFamily): EventKind[] {
  return (Object.keys(KIND_SUBJECTS) as EventKind[]).filter((k) => KIND_SUBJECTS[k].family === family);
}

/** The subject `family` has for `id` (ignored by the families with one subject). */
export function familySubject(subjects: Subjects, family: SubjectFamily, id: string): string {
  switch (family) {
    case "session":
      return subjects.session(id);
    case "node":
      return subjects.node(id);
    case "operator":
      return subjects.operator(id);
    case "gateway":
      return subjects.gateway(id);
    case "catalog":
      return subjects.catalog;
    case "rollouts":
      return subjects.rollouts;
    case "reconciler":
      return subjects.reconciler;
    default: {
      const never: never = family;
      throw new RangeError(`unknown subject family ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The subject an event belongs on (docs/ARCHITECTURE.md, "The log"), by
 * KIND_SUBJECTS. Throws a RangeError for an event no subject can hold (no
 * body, or an id that is not a subject token).
 */
export function subjectFor(subjects: Subjects, event: Event): string {
  const body = event.body;
  if (body.case === undefined) {
    throw new RangeError(`event ${event.id} has no body; nothing to append`);
  }
  const route = KIND_SUBJECTS[body.case] as SubjectRoute<unknown> | undefined;
  if (route === undefined) {
    throw new RangeError(`unknown event kind ${JSON.stringify(body.case)}`);
  }
  return familySubject(subjects, route.family, "id" in route ? route.id(body.value) : "");
}

/** An event read from a subject its kind may not be written to: passed over, never folded. */
export interface RefusedEvent {
  seq: number;
  /** The stream's time for the message (ms since the epoch). */
  timeMs: number;
  /** The subject it was stored on. */
  subject: string;
  kind: EventKind;
  event: Event;
  /** Why, in words: where the kind belongs, or why it belongs nowhere. */
  reason: string;
}

/**
 * Why an event stored on `subject` must not be read as what its body says,
 * or undefined when the subject is the one KIND_SUBJECTS gives for it. An
 * event of a kind this version does not know is not refused here (folds
 * skip it; see `decodeEvent`).
 */
export function subjectRefusal(subjects: Subjects, subject: string, event: Event): string | undefined {
  const kind = event.body.case;
  if (kind === undefined || !Object.hasOwn(KIND_SUBJECTS, kind)) return undefined;
  let expected: string;
  try {
    expected = subjectFor(subjects, event);
  } catch (err) {
    // The id in the body is not one a subject can hold: no writer could have placed it anywhere.
    return `${kind} names an id no subject can hold (${(err as Error).message}); it belongs on no subject`;
  }
  if (expected === subject) return undefined;
  const family = KIND_SUBJECTS[kind].family;
  return `${kind} is written only by the ${SUBJECT_WRITERS[family]} role to ${expected}, not to ${subject}`;
}
