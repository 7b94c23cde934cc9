/**
 * Weak API tokens are refused where a token is taken in the clear: `llmgw
 * api --token` (and LLMGW_API_TOKEN) and `llmgw api token-hash`, as real
 * processes, with an error naming the rule. Random tokens of the length
 * pass, whatever made them.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import { TOKEN_RULE, tokenSha256, weakTokenReason } from "../../src/operator/index.js";
import { runCli } from "../support/cli.js";
import { unreachablePort } from "../support/unreachable.js";

const WEAK = [
  "change-me",
  "admin-token-5c7e9a1b",
  "a".repeat(40),
  "abcdefghij".repeat(4),
  "0123456789abcdef".repeat(2),
  "aabbccddeeffgghhiijjaabbccddeeffgghhiijj",
];

describe("weak API tokens", () => {
  it("refuses short, repetitive and low-entropy tokens, saying why and what the rule is", () => {
    for (const token of WEAK) {
      const why = weakTokenReason(token);
      assert.ok(why?.includes(TOKEN_RULE), `${token}: ${why}`);
    }
    assert.match(weakTokenReason("change-me") ?? "", /^it has 9 characters/);
    assert.match(weakTokenReason("a".repeat(40)) ?? "", /only 1 different characters/);
    assert.match(weakTokenReason("abcdefghij".repeat(4)) ?? "", /repeats the same 10 characters/);
  });

  it("takes random tokens of the length: new-token's, hex, base64", () => {
    for (let i = 0; i < 2000; i++) {
      for (const token of [
        randomBytes(32).toString("base64url"),
        randomBytes(16).toString("hex"),
        randomBytes(24).toString("base64"),
      ]) {
        assert.equal(weakTokenReason(token), undefined, token);
      }
    }
  });

  it("llmgw api token-hash and --token refuse a weak token (exit 2, the rule named) and take a strong one", async () => {
    const port = await unreachablePort();
    const nats = `nats://127.0.0.1:${port.port}`;
    for (const token of ["change-me", "x".repeat(32)]) {
      const hashed = await runCli(["api", "token-hash"], { input: `${token}\n` });
      assert.equal(hashed.code, 2, hashed.stderr);
      assert.match(hashed.stderr, /token-hash: the token on stdin is too weak: .*at least 32 characters/);
      for (const [args, env] of [
        [["--token", token], {}],
        [[], { LLMGW_API_TOKEN: token }],
        [["--token", token, "--tokens", "tokens.yaml"], {}],
      ] as const) {
        const api = await runCli(["api", "--listen", "127.0.0.1:0", "--nats", nats, ...args], { env });
        assert.equal(api.code, 2, `${args.join(" ")}: ${api.stderr}`);
        assert.match(api.stderr, /--token.* is too weak: .*at least 32 characters/, api.stderr);
      }
    }
    const strong = randomBytes(16).toString("hex");
    const ok = await runCli(["api", "token-hash"], { input: `${strong}\n` });
    assert.deepEqual([ok.code, ok.stdout], [0, `${tokenSha256(strong)}\n`]);
    await port.close();
  });
});
