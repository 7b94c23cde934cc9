// The event codec: protobuf encoder and decoder generated from the schema, and the event envelope's shape.
// Pure: no NATS, no I/O, no clock. Everything public is named here.

export { compileDecoder, type Decoder } from "./binary-decoder.js";
export { compileEncoder, type Encoder } from "./binary-encoder.js";
export { decodeEventBytes, encodeEvent, MalformedEvent } from "./event-codec.js";
export { EVENT_KINDS, type EventBody, type EventInit, type EventKind, newEvent } from "./event-shape.js";
export { encodeUtf8 } from "./text-encoding.js";
