/**
 * What the log may hold after hostile input: only subjects of the layout
 * (every id token matching the strict pattern, never a wildcard, a dot or
 * anything odd), every event on the subject of the node it is about (its
 * id's token: dots written '_'), and events about nodes only when the test
 * let that node register.
 */
import assert from "node:assert/strict";
import { nodeIdToken } from "../../src/ids/index.js";
import type { LogRecord } from "../../src/log/index.js";

/** Gateway ids up to 64 characters; a node id's token up to 253. */
const TOKEN = "[A-Za-z0-9_-]{1,253}";

/**
 * The node an event is about, for the kinds written on a node's own
 * subject: every kind that names a node except CommandUndeliverable, which
 * its gateway writes on the gateway's subject.
 */
export function nodeOf(r: LogRecord): string | undefined {
  const b = r.event.body;
  if (b.case === undefined || b.case === "commandUndeliverable" || !("nodeId" in b.value)) return undefined;
  return b.value.nodeId;
}

export function assertLogHygiene(
  records: LogRecord[],
  prefix: string,
  allowedNodes: (node: string) => boolean,
): void {
  const p = prefix.replace(/\./g, "\\.");
  const layout = new RegExp(`^${p}\\.(?:(?:session|node|gateway|operator)\\.(${TOKEN})|catalog|reconciler)$`);
  for (const r of records) {
    const m = layout.exec(r.subject);
    assert.ok(m, `seq ${r.seq}: subject ${JSON.stringify(r.subject)} is not in the layout`);
    const node = nodeOf(r);
    if (node === undefined) continue;
    assert.equal(
      m[1],
      nodeIdToken(node),
      `seq ${r.seq}: a ${r.event.body.case} about ${node} on ${r.subject}`,
    );
    assert.ok(allowedNodes(node), `seq ${r.seq}: a ${r.event.body.case} for node ${JSON.stringify(node)}`);
  }
}
