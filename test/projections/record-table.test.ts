/**
 * The record table on its own: key lists, indexes, change followers, the
 * JSON form, and the verifier that the test fleet runs after every event
 * and pass (test/support/fleet.ts) shown to fire. The fork's journal is in
 * fork.test.ts; the guard against writes around the table is the type test
 * record-table.types.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  canonicalJson,
  type FleetState,
  type GroupIndex,
  type LookupIndex,
  RecordTable,
  reviveFleet,
} from "../../src/projections/index.js";
import { Fleet, llama8b, llama70b, llama405b } from "../support/fleet.js";

interface Item {
  id: string;
  colour: string;
  tags: string[];
}

const byColour: GroupIndex<Item> = { name: "byColour", keyOf: (i) => i.colour || null };
const byTag: LookupIndex<Item> = { name: "byTag", keysOf: (i) => i.tags };
const item = (id: string, colour: string, ...tags: string[]): Item => ({ id, colour, tags });

/** What the kept key lists must answer: the records object's own enumeration. */
function assertExact(state: FleetState, when: string): void {
  for (const [name, table] of [
    ["nodes", state.inventory.nodes],
    ["replicas", state.replicas.replicas],
  ] as const) {
    const rec = table.toJSON();
    assert.deepEqual(table.keys(), Object.keys(rec), `keys of ${name} ${when}`);
    assert.deepEqual(table.sortedKeys(), Object.keys(rec).sort(), `sorted keys of ${name} ${when}`);
    assert.deepEqual(table.values(), Object.values(rec), `values of ${name} ${when}`);
    assert.equal(table.size, Object.keys(rec).length);
  }
}

describe("projections: the record table", () => {
  it("given a fleet's life through the real fold (placements, scale-down, removals, a lost node), its key lists match the records after every step", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "gpu-a2", "gpu-a3", "gpu-b1"]) {
      f.connect(n);
      assertExact(f.state, `after ${n} connected`);
    }
    f.catalog(llama70b(3), llama8b(4), llama405b(1));
    for (let i = 0; i < 20; i++) {
      const out = f.step();
      assertExact(f.state, `after pass ${i}`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
      assertExact(f.state, `after the agents answered pass ${i}`);
    }
    const before = f.state.replicas.replicas.size;
    f.catalog(llama70b(1), llama8b(2), llama405b(1));
    f.disconnect("gpu-a3").advance(f.config.lostAfterMs);
    f.connect("gpu-c1");
    for (let i = 0; i < 20; i++) {
      const out = f.step();
      assertExact(f.state, `after scale-down pass ${i}`);
      if (out.decisions.length === 0 && out.commands.length === 0) break;
      f.obey(out);
      assertExact(f.state, `after the agents answered scale-down pass ${i}`);
    }
    assert.ok(f.state.replicas.replicas.size < before, "replicas were removed");
  });

  it("lists a node id that is an array index ('42', listed first by the language whatever the insertion order) as the records object does", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "42", "gpu-b1", "7"]) f.connect(n);
    assertExact(f.state, "with numeric node ids");
    assert.deepEqual(
      f.state.inventory.nodes.values().map((n) => n.nodeId),
      ["7", "42", "gpu-a1", "gpu-b1"],
    );
  });

  it("its JSON form is the plain records object, and a state made again from it folds to the same bytes", () => {
    const f = new Fleet();
    for (const n of ["gpu-a1", "gpu-a2"]) f.connect(n);
    f.catalog(llama8b(3));
    f.obey(f.step());
    const table = f.state.replicas.replicas;
    const plain = Object.fromEntries(table.keys().map((id) => [id, table.get(id)]));
    assert.equal(JSON.stringify(table), JSON.stringify(plain));
    const text = JSON.stringify(f.state);
    const again = reviveFleet(JSON.parse(text));
    assert.equal(JSON.stringify(again), text);
    assert.equal(canonicalJson(again), canonicalJson(f.state));
    again.replicas.replicas.verify();
  });

  it("given removals left out of the key lists until they are read (some sorted, some just added, some put back), then size, keys and sorted keys are the records object's, and a list handed out before is unchanged", () => {
    const t = new RecordTable<Item>();
    for (const id of ["d", "b", "a", "c", "e"]) t.put(id, item(id, ""));
    const handedOut = t.sortedKeys();
    assert.deepEqual(handedOut, ["a", "b", "c", "d", "e"]);
    t.put("f", item("f", ""));
    t.put("g", item("g", ""));
    // Removed without a read in between: "b" sorted, "f" only added since.
    t.drop("b");
    t.drop("f");
    t.drop("zz");
    assert.equal(t.size, 5);
    // Put back after its removal: at the end, as the records object has it.
    t.put("b", item("b", "again"));
    assert.equal(t.size, 6);
    t.drop("d");
    assert.equal(t.size, 5);
    const rec = t.toJSON();
    assert.deepEqual(t.keys(), Object.keys(rec));
    assert.deepEqual(t.keys(), ["a", "c", "e", "g", "b"]);
    assert.deepEqual(t.sortedKeys(), ["a", "b", "c", "e", "g"]);
    assert.deepEqual(
      t.values().map((i) => i.colour),
      ["", "", "", "", "again"],
    );
    assert.deepEqual(handedOut, ["a", "b", "c", "d", "e"], "a list handed out is never changed");
    t.verify();
  });

  it("keeps a lookup exact when a write leaves a record's keys as they were and when it changes them", () => {
    const t = new RecordTable<Item>({ lookups: [byTag] });
    t.put("a", item("a", "red", "x", "y"));
    t.put("b", item("b", "red", "y"));
    assert.equal(t.lookup(byTag, "y"), "a");
    t.update("a", (i) => {
      i.colour = "blue";
    });
    assert.equal(t.lookup(byTag, "x"), "a", "same keys: still filed");
    t.update("a", (i) => {
      i.tags = ["z"];
    });
    assert.equal(t.lookup(byTag, "x"), "");
    assert.equal(t.lookup(byTag, "y"), "b");
    assert.equal(t.lookup(byTag, "z"), "a");
    t.update("a", (i) => {
      i.tags = [];
    });
    assert.equal(t.lookup(byTag, "z"), "");
    t.verify();
  });

  it("answers its declared groups and lookups through every writer, and refuses an index it was not declared with", () => {
    const t = new RecordTable<Item>({ groups: [byColour], lookups: [byTag] });
    t.put("a", item("a", "red", "x"));
    t.put("b", item("b", "blue", "x", "y"));
    assert.deepEqual(t.groupIds(byColour, "red"), ["a"]);
    assert.equal(t.lookup(byTag, "x"), "a", "two name x: the first in insertion order");
    t.update("a", (i) => {
      i.colour = "blue";
      i.tags = [];
    });
    assert.deepEqual(t.groupIds(byColour, "blue"), ["a", "b"]);
    assert.equal(t.lookup(byTag, "x"), "b");
    t.drop("b");
    assert.deepEqual(t.groupIds(byColour, "blue"), ["a"]);
    assert.equal(t.lookup(byTag, "y"), "");
    t.verify();
    const other: GroupIndex<Item> = { name: "other", keyOf: () => "" };
    assert.throws(() => t.groups(other), /other was not declared/);
  });

  it("keeps a group's sorted ids exact through few and many changes (patched or sorted again), and never changes a list it handed out", () => {
    const t = new RecordTable<Item>({ groups: [byColour] });
    const id = (i: number) => `r-${String((i * 7919) % 1000).padStart(4, "0")}`;
    for (let i = 0; i < 1000; i++) t.put(id(i), item(id(i), "red"));
    const first = t.groupIds(byColour, "red");
    const firstCopy = [...first];
    let seed = 1;
    const next = () => {
      seed = (seed * 48271) % 2147483647;
      return seed;
    };
    // Rounds of 1 to 120 changes: below the patch limit they are patched in, above it the list is sorted again.
    for (let round = 0; round < 40; round++) {
      const changes = 1 + (next() % (round % 2 === 0 ? 8 : 120));
      for (let c = 0; c < changes; c++) {
        const target = id(next() % 1000);
        const colour = next() % 3 === 0 ? "blue" : "red";
        // Some ids leave and come back within the round, some come and go.
        t.update(target, (i) => {
          i.colour = colour;
        });
        if (c % 5 === 0)
          t.update(target, (i) => {
            i.colour = colour === "red" ? "blue" : "red";
          });
      }
      const want = t
        .values()
        .filter((i) => i.colour === "red")
        .map((i) => i.id)
        .sort();
      assert.deepEqual(t.groupIds(byColour, "red"), want, `round ${round}`);
    }
    assert.deepEqual(first, firstCopy, "a list handed out before the changes is as it was");
    t.verify();
  });

  it("a write around the table (a cast away of `Readonly`) is caught by the verifier: groups, lookups and both", () => {
    for (const [what, change] of [
      [
        "group",
        (i: Item) => {
          i.colour = "green";
        },
      ],
      [
        "lookup",
        (i: Item) => {
          i.tags.push("z");
        },
      ],
    ] as const) {
      const t = new RecordTable<Item>({ groups: [byColour], lookups: [byTag] });
      t.put("a", item("a", "red", "x"));
      t.verify();
      change(t.get("a") as Item);
      assert.throws(() => t.verify(), /is stale/, `a ${what} index changed around the table`);
    }
  });

  it("gives each change follower every id written since it last took them, once, whoever wrote it", () => {
    const t = new RecordTable<Item>({}, { a: item("a", "red"), b: item("b", "red") });
    const first = t.followChanges();
    t.put("c", item("c", "red"));
    const second = t.followChanges();
    t.update("a", (i) => {
      i.colour = "blue";
    });
    t.update("a", (i) => {
      i.colour = "green";
    });
    t.drop("b");
    assert.deepEqual([...first.take()].sort(), ["a", "b", "c"]);
    assert.deepEqual([...first.take()], [], "taken ids are not given again");
    assert.deepEqual(
      [...second.take()].sort(),
      ["a", "b"],
      "a follower sees what was written after it started",
    );
    second.stop();
    t.put("d", item("d", "red"));
    assert.deepEqual([...first.take()], ["d"]);
    assert.deepEqual([...second.take()], [], "a stopped follower keeps nothing");
    t.fork();
    t.update("a", (i) => {
      i.colour = "red";
    });
    assert.deepEqual([...first.take()], ["a"], "a fork's writes are followed");
    t.release();
    assert.deepEqual([...first.take()], ["a"], "and its release: the record put back is read again");
    assert.equal(t.get("a")?.colour, "green");
  });

  it("given a fork that adds, replaces, changes and drops records, when released, then records, content, order and key lists are as before", () => {
    const t = new RecordTable<Item>({ groups: [byColour], lookups: [byTag] });
    for (const id of ["a", "b", "c", "d"]) t.put(id, item(id, "red", id));
    const held = t.get("b") as Readonly<Item>;
    const text = JSON.stringify(t);
    const sorted = t.sortedKeys();
    t.groupIds(byColour, "red");
    t.fork();
    t.update("b", (i) => {
      i.colour = "blue";
      i.tags.push("q");
    });
    t.drop("b");
    t.put("b", item("b", "green"));
    t.put("e", item("e", "red"));
    t.drop("a");
    t.update("c", (i) => {
      delete (i as Partial<Item>).colour;
    });
    t.verify();
    t.release();
    assert.equal(JSON.stringify(t), text);
    assert.equal(t.get("b"), held, "the object read before the fork");
    assert.deepEqual(held, item("b", "red", "b"));
    assert.deepEqual(t.sortedKeys(), sorted);
    assert.deepEqual(t.keys(), ["a", "b", "c", "d"]);
    assert.deepEqual(t.groupIds(byColour, "red"), ["a", "b", "c", "d"]);
    assert.equal(t.lookup(byTag, "e"), "");
    t.verify();
  });
});
