/** Ids that would name the prototype of a projected map instead of an entry. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isReservedKey } from "../../src/ids/index.js";

describe("reserved keys", () => {
  it("refuses every name a plain object answers to", () => {
    const names = Object.getOwnPropertyNames(Object.prototype);
    assert.ok(names.length >= 12);
    for (const name of names) {
      assert.equal(isReservedKey(name), true, name);
      // A name built at run time (not the literal the set was made of).
      assert.equal(isReservedKey([...name].join("")), true, `${name}, built`);
    }
  });

  it("takes ids that share a length, a first character or a prefix with one", () => {
    for (const id of [
      "",
      "c",
      "construct",
      "constructoR",
      "toString2",
      "valueOF",
      "__proto",
      "hasOwnPropertyX",
      "r-0001.17",
      "cmd-1",
    ]) {
      assert.equal(isReservedKey(id), false, JSON.stringify(id));
    }
  });
});
