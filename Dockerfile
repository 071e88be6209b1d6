# floodgate gateway image: builds and packs floodgate, installs floodgate-gateway's runtime packages, and runs `floodgate serve` as the non-root node user (uid 1000).
# Build: docker build -t floodgate-gateway .   Run: docker run -p 8080:8080 floodgate-gateway --config /etc/floodgate/floodgate.yaml --upstream http://app:3000
# test/deploy/dockerfile-steps.test.ts runs the build stage's COPY/RUN steps outside a container; keep them relative to WORKDIR /build.

# ---- build: compile, pack both packages, install what the gateway runs with ----
FROM node:20.20.2-alpine AS build
WORKDIR /build
# The lockfile alone first, so the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
# Scripts are skipped: the build needs tsc only, and a bench-only native addon would need a compiler.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.cjs.json README.md LICENSE ./
COPY scripts/ scripts/
COPY src/ src/
COPY bin/ bin/
COPY packages/gateway/ packages/gateway/
RUN npm run build \
 && mkdir -p pack \
 && npm pack --ignore-scripts --pack-destination pack \
 && npm pack --ignore-scripts --pack-destination pack ./packages/gateway
# The runtime tree: the two packed tarballs and floodgate-gateway's dependencies, without dev packages.
WORKDIR /build/app
RUN npm init -y > /dev/null \
 && npm install --omit=dev --ignore-scripts --no-audit --no-fund ../pack/*.tgz

# ---- runtime: node and the installed tree, nothing else ----
FROM node:20.20.2-alpine
# A young generation sized for many requests in flight: at 200 connections a gateway on V8's default spent a quarter
# more CPU per request in scavenges (docs/scaling.md "Sizing"); --workers gives its workers the same by itself.
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=64 \
    PATH=/app/node_modules/.bin:$PATH \
    FLOODGATE_HEALTH_URL=http://127.0.0.1:9090/healthz
WORKDIR /app
# Owned by root and not writable by the node user: the gateway only reads its code.
COPY --from=build /build/app/ /app/
COPY deploy/docker/floodgate.yaml /etc/floodgate/floodgate.yaml
# The image's node user, by number: Kubernetes' runAsNonRoot can check only a numeric user.
USER 1000:1000
# 8080: the proxy listener; 9090: the admin listener (/healthz, /readyz, /metrics).
EXPOSE 8080 9090
# No curl in the image: node's fetch asks the admin listener's /healthz (FLOODGATE_HEALTH_URL when the admin port moves).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.FLOODGATE_HEALTH_URL).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["floodgate", "serve"]
CMD ["--config", "/etc/floodgate/floodgate.yaml"]
