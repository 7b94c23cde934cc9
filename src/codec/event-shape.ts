/**
 * The event envelope's shape: its kinds, its body, and a new event from its
 * fields. Pure (protobuf and the schema only), so the pure rooms — the
 * gateway's session core among them — can build events without importing
 * the log's I/O; `codec.ts` re-exports it beside the encoder and decoder.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../gen/llmgw/v1/events_pb.js";

/** The kinds of event the log holds (the `body` cases of the envelope). */
export type EventKind = NonNullable<Event["body"]["case"]>;

/** Every event kind, read from the schema, so a kind added to the proto is known everywhere at once. */
export const EVENT_KINDS: readonly EventKind[] = (
  EventSchema.oneofs.find((o) => o.name === "body")?.fields ?? []
).map((f) => f.localName as EventKind);

/** An event body: one case of the envelope's oneof. */
export type EventBody = Exclude<Event["body"], { case: undefined }>;

/** The envelope fields a writer fills in besides the body. */
export type EventInit = MessageInitShape<typeof EventSchema>;

export function newEvent(init: EventInit): Event {
  return create(EventSchema, init);
}
