import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { EnvelopeReader, envelope } from "../../src/gateway/agent-call/envelopes.js";
import {
  directProtocol,
  protocolFamily,
  responseCompression,
} from "../../src/gateway/agent-call/protocol.js";

const bytes = (...xs: number[]) => Uint8Array.from(xs);

function readAll(reader: EnvelopeReader, chunks: Uint8Array[]): Array<{ flags: number; data: number[] }> {
  const out: Array<{ flags: number; data: number[] }> = [];
  for (const c of chunks) for (const { flags, data } of reader.push(c)) out.push({ flags, data: [...data] });
  return out;
}

describe("agent-call envelopes", () => {
  it("reads envelopes however the body is cut into chunks", () => {
    const body = new Uint8Array([
      ...envelope(0, bytes(1, 2, 3)),
      ...envelope(2, bytes()),
      ...envelope(1, bytes(9)),
      ...envelope(0, new Uint8Array(300).fill(7)),
    ]);
    const whole = readAll(new EnvelopeReader(1024), [body]);
    assert.deepEqual(
      whole.map((e) => [e.flags, e.data.length]),
      [
        [0, 3],
        [2, 0],
        [1, 1],
        [0, 300],
      ],
    );
    assert.deepEqual(whole[0]!.data, [1, 2, 3]);
    // Every cut of the body into two chunks, and one byte at a time.
    for (let cut = 0; cut <= body.length; cut++) {
      const r = new EnvelopeReader(1024);
      assert.deepEqual(readAll(r, [body.subarray(0, cut), body.subarray(cut)]), whole, `cut at ${cut}`);
      assert.equal(r.buffered, 0);
      r.end();
    }
    const r = new EnvelopeReader(1024);
    assert.deepEqual(
      readAll(
        r,
        [...body].map((b) => bytes(b)),
      ),
      whole,
    );
  });

  it("reads a large message arriving in many chunks, and the envelopes around it", () => {
    const big = Uint8Array.from({ length: 1 << 20 }, (_, i) => i % 251);
    const body = new Uint8Array([...envelope(0, bytes(1)), ...envelope(0, big), ...envelope(2, bytes(2, 3))]);
    const r = new EnvelopeReader(1 << 20);
    const got: Array<{ flags: number; data: Uint8Array }> = [];
    for (let at = 0; at < body.length; at += 16_384) got.push(...r.push(body.subarray(at, at + 16_384)));
    r.end();
    assert.deepEqual(
      got.map((e) => [e.flags, e.data.length]),
      [
        [0, 1],
        [0, 1 << 20],
        [2, 2],
      ],
    );
    assert.deepEqual(got[1]!.data, big);
  });

  it("refuses a message over the limit from its header, before its bytes arrive", () => {
    const r = new EnvelopeReader(100);
    const header = envelope(0, new Uint8Array(101)).subarray(0, 5);
    assert.throws(
      () => r.push(header),
      (err: unknown) =>
        err instanceof ConnectError &&
        err.code === Code.ResourceExhausted &&
        err.rawMessage === "message size 101 is larger than configured readMaxBytes 100",
    );
    // Exactly the limit is taken.
    assert.equal(readAll(new EnvelopeReader(100), [envelope(0, new Uint8Array(100))]).length, 1);
  });

  it("refuses a body that ends inside an envelope, as Connect's reader does", () => {
    const whole = envelope(0, bytes(1, 2, 3));
    for (const cut of [1, 4, 6, 7]) {
      const r = new EnvelopeReader(1024);
      readAll(r, [whole.subarray(0, cut)]);
      assert.equal(r.buffered, cut);
      assert.throws(
        () => r.end(),
        (err: unknown) => err instanceof ConnectError && err.code === Code.InvalidArgument,
        `cut after ${cut} bytes`,
      );
    }
    // A header alone: Connect's reader has taken it and holds nothing, so the body ends cleanly.
    const r = new EnvelopeReader(1024);
    readAll(r, [whole.subarray(0, 5)]);
    r.end();
  });

  it("hands over none of a chunk that announces a message over the limit (as Connect's reader)", () => {
    const r = new EnvelopeReader(100);
    const chunk = new Uint8Array([
      ...envelope(0, bytes(1)),
      ...envelope(0, new Uint8Array(101)).subarray(0, 5),
    ]);
    assert.throws(() => r.push(chunk), /message size 101/);
  });

  it("reads a length with the top bit set as a large length, not a negative one", () => {
    const r = new EnvelopeReader(1024);
    assert.throws(() => r.push(bytes(0, 0xff, 0xff, 0xff, 0xff)), /message size 4294967295 is larger/);
  });
});

describe("which agent streams are framed directly", () => {
  const post = (headers: Record<string, string>) => directProtocol("POST", headers);
  it("takes binary gRPC and Connect streams without compression or a deadline", () => {
    assert.equal(post({ "content-type": "application/grpc" }), "grpc");
    assert.equal(post({ "content-type": "application/grpc+proto" }), "grpc");
    assert.equal(post({ "content-type": "application/grpc+proto", "grpc-encoding": "identity" }), "grpc");
    assert.equal(post({ "content-type": "application/connect+proto" }), "connect");
    assert.equal(
      post({ "content-type": "application/connect+proto", "connect-content-encoding": "identity" }),
      "connect",
    );
  });

  it("leaves everything else to Connect's handler", () => {
    for (const headers of [
      {},
      { "content-type": "application/grpc+json" },
      { "content-type": "application/grpc-web+proto" },
      { "content-type": "application/grpc-web" },
      { "content-type": "application/connect+json" },
      { "content-type": "application/proto" },
      { "content-type": "application/json" },
      { "content-type": "text/plain" },
      { "content-type": "application/grpc", "grpc-encoding": "gzip" },
      { "content-type": "application/grpc", "grpc-timeout": "10S" },
      { "content-type": "application/connect+proto", "connect-content-encoding": "gzip" },
      { "content-type": "application/connect+proto", "connect-timeout-ms": "1000" },
    ] as Array<Record<string, string>>) {
      assert.equal(post(headers), undefined, JSON.stringify(headers));
    }
    assert.equal(directProtocol("GET", { "content-type": "application/grpc" }), undefined);
  });

  it("names the protocol of what Connect's handler serves, for the metric", () => {
    assert.equal(protocolFamily("application/grpc-web+proto"), "grpc-web");
    assert.equal(protocolFamily("application/grpc+json"), "grpc");
    assert.equal(protocolFamily("application/connect+json"), "connect");
    assert.equal(protocolFamily("application/json"), "connect");
    assert.equal(protocolFamily("text/plain"), "other");
    assert.equal(protocolFamily(undefined), "other");
  });
});

describe("how the replies of a stream framed directly are compressed", () => {
  it("as Connect's handler negotiates it: the client's first accepted encoding it supports, named in the response", () => {
    const of = (p: "grpc" | "connect", headers: Record<string, string>) => {
      const c = responseCompression(p, headers);
      return c && [c.header, c.compression.name];
    };
    assert.equal(of("grpc", {}), undefined);
    assert.deepEqual(of("grpc", { "grpc-accept-encoding": "gzip,br" }), ["grpc-encoding", "gzip"]);
    assert.deepEqual(of("grpc", { "grpc-accept-encoding": "zstd, br" }), ["grpc-encoding", "br"]);
    assert.equal(of("grpc", { "grpc-accept-encoding": "zstd" }), undefined);
    assert.deepEqual(of("connect", { "connect-accept-encoding": "gzip" }), [
      "connect-content-encoding",
      "gzip",
    ]);
    // The other protocol's header means nothing.
    assert.equal(of("connect", { "grpc-accept-encoding": "gzip" }), undefined);
  });
});
