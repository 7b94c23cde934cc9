# The llmgw image: one image for every process (gateway, reconciler, api, sim, certs).

# Built the way the npm package is (scripts/build: tsc compiles src into
# dist/src, Vite builds the web UI into dist/ui) in a stage that has the dev
# dependencies; only the built files and the production dependencies go into
# the image, which runs the compiled JavaScript (no tsx, no TypeScript sources).
FROM node:24-bookworm-slim AS build
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN scripts/build

FROM node:24-bookworm-slim
# openssl: `llmgw certs` creates development certificates with it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY examples ./examples
COPY scripts/ensure-nats-server ./scripts/ensure-nats-server
COPY --from=build /build/dist/src ./dist/src
COPY --from=build /build/dist/ui ./dist/ui
# The mount points of the NATS credentials and API token volumes, owned by
# the image's user: a fresh named volume takes this ownership, so
# `llmgw nats-auth init` and `llmgw api init-token` run as that user can
# write the seeds and the token (mode 0600) that the services read.
RUN mkdir /nats-auth /api-auth && chown 1000:1000 /nats-auth /api-auth
# The image's `node` user, by number so that Kubernetes' runAsNonRoot can
# verify it is not root.
USER 1000:1000
ENTRYPOINT ["node", "/app/bin/llmgw.js"]
CMD ["--help"]
