/**
 * docker-compose.yml cannot run on machines without a Docker engine, so it is
 * checked here instead: its shape (a 3-node JetStream cluster, two gateways
 * behind a load balancer, two reconcilers, the API, a simulated fleet), and
 * that every llmgw command, flag and LLMGW_* variable it uses exists in the
 * real CLI (its commander program, read by test/support/cli-spec.ts).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { z } from "zod";
import { invocationProblems } from "../support/cli-spec.js";

const ROOT = join(import.meta.dirname, "../..");

const service = z.object({
  image: z.string().optional(),
  build: z.union([z.string(), z.object({ context: z.string() })]).optional(),
  command: z.array(z.string()).optional(),
  environment: z.record(z.string(), z.string()).optional(),
  volumes: z.array(z.string()).optional(),
  ports: z.array(z.string()).optional(),
  depends_on: z.unknown().optional(),
  restart: z.string().optional(),
  user: z.string().optional(),
});
const compose = z.object({
  services: z.record(z.string(), service),
  volumes: z.record(z.string(), z.unknown()).optional(),
});

function load() {
  const doc = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
  return compose.parse(Object.fromEntries(Object.entries(doc).filter(([k]) => !k.startsWith("x-"))));
}

describe("docker-compose.yml", () => {
  it("describes the production shape", () => {
    const { services } = load();
    const names = Object.keys(services);
    for (const n of [
      "nats-1",
      "nats-2",
      "nats-3",
      "gateway-1",
      "gateway-2",
      "lb",
      "reconciler-1",
      "reconciler-2",
      "api",
      "sim",
      "certs",
    ]) {
      assert.ok(names.includes(n), `no service ${n}`);
    }
    for (const n of ["nats-1", "nats-2", "nats-3"]) {
      const cmd = services[n]!.command ?? [];
      assert.ok(cmd.includes("--jetstream"), `${n} runs without JetStream`);
      const routes = cmd[cmd.indexOf("--routes") + 1] ?? "";
      const others = ["nats-1", "nats-2", "nats-3"].filter((o) => o !== n);
      for (const o of others) assert.match(routes, new RegExp(`${o}:6222`), `${n} has no route to ${o}`);
      assert.match(
        services[n]!.image ?? "",
        /^nats:2\.(1[5-9]|[2-9]\d)/,
        `${n} must run nats-server >= 2.15`,
      );
    }
    const natsUrl = services["api"]!.environment?.["LLMGW_NATS_URL"] ?? "";
    for (const n of ["nats-1", "nats-2", "nats-3"]) assert.match(natsUrl, new RegExp(n));
    assert.equal(services["api"]!.environment?.["LLMGW_STREAM_REPLICAS"], "3");
    const haproxy = readFileSync(join(ROOT, "deploy/haproxy.cfg"), "utf8");
    for (const g of ["gateway-1", "gateway-2"]) {
      const listen = (services[g]!.command ?? [])[(services[g]!.command ?? []).indexOf("--listen") + 1] ?? "";
      const port = listen.split(":").pop();
      assert.match(
        haproxy,
        new RegExp(`server ${g} ${g}:${port}`),
        `the load balancer does not reach ${g} on ${port}`,
      );
    }
    assert.match((services["sim"]!.command ?? []).join(" "), /--gateway https:\/\/lb:8443/);
  });

  it("runs NATS with authentication and gives each service its role's credentials", () => {
    const { services } = load();
    const init = services["nats-auth"]?.command ?? [];
    assert.deepEqual(init.slice(0, 2), ["nats-auth", "init"], "no nats-auth init service");
    const dir = init[init.indexOf("--dir") + 1];
    for (const n of ["nats-1", "nats-2", "nats-3"]) {
      const cmd = services[n]!.command ?? [];
      assert.equal(
        cmd[cmd.indexOf("--config") + 1],
        `${dir}/auth.conf`,
        `${n} does not load the auth config`,
      );
      assert.ok(
        (services[n]!.volumes ?? []).some((v) => v.startsWith(`nats-auth:${dir}`)),
        `${n} does not mount the credentials volume`,
      );
    }
    const roles: Record<string, string> = {
      "gateway-1": "gateway",
      "gateway-2": "gateway",
      "reconciler-1": "reconciler",
      "reconciler-2": "reconciler",
      api: "api",
    };
    for (const [name, role] of Object.entries(roles)) {
      const s = services[name]!;
      assert.equal(s.environment?.["LLMGW_NATS_CREDS"], `${dir}/${role}.nk`, `${name}'s credentials`);
      assert.ok(
        (s.volumes ?? []).some((v) => v === `nats-auth:${dir}:ro`),
        `${name} does not mount the credentials (read-only)`,
      );
    }
    assert.equal(
      services["sim"]!.environment?.["LLMGW_NATS_CREDS"],
      undefined,
      "agents never get NATS credentials",
    );
  });

  it("ships no API token: the first start makes one, the API reads only its hash, on the host's loopback", () => {
    const { services } = load();
    const raw = readFileSync(join(ROOT, "docker-compose.yml"), "utf8");
    for (const [name, s] of Object.entries(services))
      assert.equal(s.environment?.["LLMGW_API_TOKEN"], undefined, `${name} sets an API token`);
    assert.doesNotMatch(raw, /LLMGW_API_TOKEN\b(?!S)/, "no LLMGW_API_TOKEN (with a default or not)");
    const init = services["api-token"]?.command ?? [];
    assert.deepEqual(init.slice(0, 2), ["api", "init-token"], "no api init-token service");
    const dir = init[init.indexOf("--dir") + 1];
    assert.ok(
      (services["api-token"]!.volumes ?? []).some((v) => v === `api-auth:${dir}`),
      "the token service writes into the api-auth volume",
    );
    const api = services["api"]!;
    assert.equal(api.environment?.["LLMGW_API_TOKENS"], `${dir}/tokens.yaml`);
    assert.ok((api.volumes ?? []).includes(`api-auth:${dir}:ro`), "the API mounts the tokens read-only");
    assert.deepEqual((api.depends_on as Record<string, unknown> | undefined)?.["api-token"], {
      condition: "service_completed_successfully",
    });
    assert.deepEqual(api.ports, ["127.0.0.1:8080:8080"], "the API is published on loopback only");
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    assert.match(
      dockerfile,
      /chown 1000:1000 .*\/api-auth/,
      "the image's user owns the token volume's mount point",
    );
  });

  it("uses only llmgw commands, flags and variables that exist", () => {
    const { services } = load();
    const llmgw = Object.entries(services).filter(
      ([, s]) => s.build !== undefined || s.image === "llmgw:dev",
    );
    assert.ok(llmgw.length >= 7);
    for (const [name, s] of llmgw) {
      assert.ok(s.command?.[0], `${name} has no command`);
      const problems = invocationProblems(s.command, Object.keys(s.environment ?? {}));
      assert.deepEqual(problems, [], `${name}: ${problems.join("; ")}`);
    }
  });

  it("would catch a flag, variable or command that does not exist", () => {
    assert.deepEqual(invocationProblems(["gateway", "--listen", "0.0.0.0:8443"], ["LLMGW_NATS_URL"]), []);
    assert.deepEqual(invocationProblems(["gateway", "--no-such-flag"]), [
      "llmgw gateway has no --no-such-flag",
    ]);
    assert.deepEqual(invocationProblems(["api"], ["LLMGW_GATEWAY_ID"]), [
      "llmgw api reads no LLMGW_GATEWAY_ID",
    ]);
    assert.deepEqual(invocationProblems(["gateway", "--listen"]), ["llmgw gateway --listen needs a value"]);
    assert.deepEqual(invocationProblems(["serve"]), ['llmgw has no command "serve"']);
    assert.deepEqual(invocationProblems(["catalog", "apply", "-f", "catalog.yaml"]), []);
    assert.deepEqual(invocationProblems(["drain", "gpu-1", "gpu-2"]), [
      "llmgw drain takes 1 argument(s), got 2",
    ]);
  });

  it("builds an image from files that exist", () => {
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    // Copies from the build context (a `COPY --from=<stage>` takes what an earlier stage built).
    const copies = [...dockerfile.matchAll(/^COPY\s+(?!--from=)(.+)\s+\S+$/gm)].flatMap((m) =>
      m[1]!.split(/\s+/),
    );
    assert.ok(copies.length > 0);
    for (const c of copies)
      assert.ok(existsSync(join(ROOT, c)), `Dockerfile copies ${c}, which does not exist`);
    assert.match(dockerfile, /ENTRYPOINT \["node", "\/app\/bin\/llmgw\.js"\]/);
    // The code and the web UI are built in a stage of their own, as the npm package is
    // (scripts/build), and only the output is copied in.
    assert.match(dockerfile, /^RUN scripts\/build$/m);
    assert.match(dockerfile, /^COPY --from=build \/build\/dist\/src \.\/dist\/src$/m);
    assert.match(dockerfile, /^COPY --from=build \/build\/dist\/ui \.\/dist\/ui$/m);
    // The image runs as a non-root user.
    const user = [...dockerfile.matchAll(/^USER\s+(\S+)$/gm)].at(-1)?.[1];
    assert.ok(user !== undefined && !/^(root|0)(:|$)/.test(user), `the image runs as ${user ?? "root"}`);
  });
});
