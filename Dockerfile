# The llmgw image: one image for every process (gateway, reconciler, api, sim, certs).

# The web UI is built with the dev dependencies (Vite, Preact) in a stage of its own;
# only the built files go into the image.
FROM node:20-bookworm-slim AS ui
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY src/operator/ui ./src/operator/ui
COPY scripts/build-ui ./scripts/build-ui
RUN scripts/build-ui --force

FROM node:20-bookworm-slim
# openssl: `llmgw certs` creates development certificates with it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY examples ./examples
COPY tsconfig.json ./
COPY --from=ui /build/dist/ui ./dist/ui
USER node
ENTRYPOINT ["node", "/app/bin/llmgw.js"]
CMD ["--help"]
