#!/usr/bin/env bash
# npm.sh: the toolbox's tools Debian does not package, from npm, run as a
# step of the toolbox's template build (which has network egress):
#
#   - into /opt/toolbox, which the template freezes into a read-only layer:
#     bun, Biome, the TypeScript language server and TypeScript;
#   - into the workspace's app/, which becomes /template/app in every
#     sandbox of the template: a TanStack Start seed project with its
#     node_modules installed.
#
# Versions are pinned here; change them together.
set -euo pipefail

npm install --global --prefix /opt/toolbox --no-fund --no-audit \
	bun@1.4.4 @biomejs/biome@2.6.8 typescript-language-server@6.0.2 typescript@5

cd app
npm install --no-fund --no-audit
