import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createUser } from "@nats-io/nkeys";
import {
  authenticatorFromCredentials,
  formatNkeySeedFile,
  NatsCredentialsError,
} from "../../src/nats-auth/index.js";

const seedOf = () => new TextDecoder().decode(createUser().getSeed());

describe("NATS credentials files", () => {
  it("takes the seed file nats-auth init writes and signs the server's nonce with it", () => {
    const kp = createUser();
    const seed = new TextDecoder().decode(kp.getSeed());
    const auth = authenticatorFromCredentials(formatNkeySeedFile(seed, "test"));
    const answer = auth("nonce-1") as { nkey?: string; sig?: string };
    assert.equal(answer.nkey, kp.getPublicKey());
    assert.ok(answer.sig && answer.sig.length > 0, "no signature");
  });

  it("takes a JWT .creds file (user JWT and seed)", () => {
    const text = [
      "-----BEGIN NATS USER JWT-----",
      "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVQUJDIn0.c2ln",
      "------END NATS USER JWT------",
      "",
      "-----BEGIN USER NKEY SEED-----",
      seedOf(),
      "------END USER NKEY SEED------",
    ].join("\n");
    const answer = authenticatorFromCredentials(text)("nonce-2") as { jwt?: string };
    assert.match(answer.jwt ?? "", /^eyJ0eXAi/);
  });

  it("refuses text without a seed, a seed with a wrong checksum and a malformed JWT block", () => {
    const seed = seedOf();
    // A character in the middle: all five of its bits are the key's. The last
    // character's lowest bits are base32 padding (one seed in eight ends in
    // "A", and "B" differs from it only there), so changing it may change nothing.
    const at = 10;
    const flipped = `${seed.slice(0, at)}${seed[at] === "A" ? "B" : "A"}${seed.slice(at + 1)}`;
    for (const [text, why] of [
      ["not a credentials file", /no NATS user nkey seed/],
      [formatNkeySeedFile(flipped, "test"), /seed is not valid/],
      [`-----BEGIN NATS USER JWT-----\n!!!\n${formatNkeySeedFile(seed, "t")}`, /JWT block is malformed/],
    ] as const) {
      assert.throws(
        () => authenticatorFromCredentials(text),
        (err) => err instanceof NatsCredentialsError && why.test(err.message),
      );
    }
  });
});
