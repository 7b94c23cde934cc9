# The llmgw image: one image for every process (gateway, reconciler, api, sim, certs).
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
USER node
ENTRYPOINT ["node", "/app/bin/llmgw.js"]
CMD ["--help"]
