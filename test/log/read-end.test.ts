import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { afterLagging, endBeforeAsking, onDelivery, readStop } from "../../src/log/read-end.js";

const range = { fromSeq: 1, fromTimeMs: undefined, untilSeq: undefined, follow: false };

describe("read end: where a read stops", () => {
  it("stops at the stream's last sequence when the read began, unless a last one is named", () => {
    assert.equal(readStop(range, 40), 40);
    assert.equal(readStop({ ...range, untilSeq: 12 }, 40), 12);
  });
  it("a follower never stops on its own", () => {
    assert.equal(readStop({ ...range, follow: true }, 40), Number.POSITIVE_INFINITY);
    assert.equal(readStop({ ...range, follow: true }, 0), Number.POSITIVE_INFINITY);
  });
  it("has nothing to read from an empty stream or from past the end", () => {
    assert.equal(readStop(range, 0), undefined);
    assert.equal(readStop({ ...range, fromSeq: 41 }, 40), undefined);
  });
  it("a start time is placed by the server: a read from a time past the last sequence still asks", () => {
    assert.equal(readStop({ ...range, fromSeq: 41, fromTimeMs: 5 }, 40), 40);
  });
});

describe("read end: a delivered message", () => {
  it("past the end is dropped, at the end is the last", () => {
    assert.equal(onDelivery(11, 10, false, 3), "past-end");
    assert.equal(onDelivery(10, 10, false, 3), "last");
    assert.equal(onDelivery(10, 10, true, 0), "last");
  });
  it("with nothing pending, a read that does not follow asks whether anything is left", () => {
    assert.equal(onDelivery(5, 10, false, 0), "check");
    assert.equal(onDelivery(5, 10, true, 0), "next");
    assert.equal(onDelivery(5, 10, false, 2), "next");
  });
});

describe("read end: is anything left", () => {
  it("a consumer that counts messages pending has more", () => {
    assert.equal(endBeforeAsking(1, 3, 10, true), "more");
  });
  it("one copy of the stream: the consumer's zero is the answer", () => {
    assert.equal(endBeforeAsking(0, 3, 10, false), "end");
  });
  it("several copies: a zero before the read's end is checked with the stream leader", () => {
    assert.equal(endBeforeAsking(0, 3, 10, true), "ask-leader");
    assert.equal(endBeforeAsking(0, 10, 10, true), "end");
  });
});

describe("read end: lagging consumers", () => {
  it("a consumer that delivered something resets the count", () => {
    assert.deepEqual(afterLagging(5, 17, 8), { fruitless: 0, giveUp: false });
  });
  it("gives up after more than the allowed fruitless consumers in a row", () => {
    assert.deepEqual(afterLagging(7, 0, 8), { fruitless: 8, giveUp: false });
    assert.deepEqual(afterLagging(8, 0, 8), { fruitless: 9, giveUp: true });
  });
});
