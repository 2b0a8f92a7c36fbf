#!/usr/bin/env bash
# build.sh makes the "toolbox" template: the tools agents expect in a
# workspace, from Debian, checked in a sandbox and frozen as a template.
#
# On the base template a sandbox's /usr is this machine's /usr, read-only,
# so system tools are installed on the host (once, by apt) and every
# sandbox sees them; the template adds the environment and proves each
# tool runs inside the sandbox. Run it as root next to a running daemon:
#
#   make toolbox            # or: templates/toolbox/build.sh [--rebuild]
#   berth sandbox create --template toolbox
#
# What Debian does not package comes from npm (npm.sh): bun, Biome, the
# TypeScript language server, and a TanStack Start seed project with its
# node_modules at /template/app. The build has network egress, under the
# daemon's default policy; a registry (or mirror) at a private address needs
# the daemon started with --egress-public ADDRESS/32. npm's global prefix is
# $HOME/.local, so npm install -g works in a sandbox's read-only root.
#
#   templates/toolbox/build.sh --npm-only [NAME]   # only the npm half, as
#                                                  # the tests build it
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
berth=${BERTH:-$here/../../bin/berth}

# The npm half's environment and steps.
npm_args=(
	--network egress
	-e NPM_CONFIG_PREFIX=/workspace/.local
	-e PATH=/workspace/.local/bin:/opt/toolbox/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	--copy "$here/npm.sh:.toolbox/npm.sh"
)
for f in package.json tsconfig.json vite.config.ts src/router.tsx src/routes/__root.tsx src/routes/index.tsx; do
	npm_args+=(--copy "$here/tanstack-start/$f:app/$f")
done
npm_args+=(
	--run 'bash .toolbox/npm.sh'
	--run 'bun --version && biome --version && typescript-language-server --version && test -d app/node_modules/@tanstack/react-start'
)

if [[ "${1:-}" == --npm-only ]]; then
	exec "$berth" template build "${2:-toolbox-npm}" "${npm_args[@]}" --run 'rm -rf .toolbox .cache .config .npm'
fi

packages=(
	# languages and package managers
	nodejs node-typescript python3 python3-pip python3-venv
	# data science
	python3-numpy python3-pandas python3-matplotlib python3-seaborn python3-scipy
	python3-sklearn python3-pil python3-openpyxl
	# documents
	pandoc weasyprint tesseract-ocr tesseract-ocr-eng imagemagick poppler-utils
	# web
	python3-fastapi python3-flask python3-uvicorn python3-requests python3-httpx
	# everyday tools
	git curl jq ripgrep sqlite3 unzip zip xz-utils file
	# fonts for rendering
	fonts-noto-core fonts-dejavu-core
)

# A Node.js from elsewhere (NodeSource) carries its own npm and conflicts
# with Debian's package of it.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "toolbox: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

if [[ "${1:-}" == --rebuild ]]; then
	"$berth" template rm toolbox 2>/dev/null || true
elif "$berth" template get toolbox >/dev/null 2>&1; then
	echo "toolbox: the template exists (pass --rebuild to make it again)" >&2
	exit 0
fi

# Each check runs inside the build sandbox, as a sandbox would run it.
"$berth" template build toolbox "${npm_args[@]}" \
	-e MPLBACKEND=Agg -e PYTHONDONTWRITEBYTECODE=1 \
	--copy "$here/check.py:.toolbox/check.py" \
	--run 'python3 .toolbox/check.py' \
	--run 'node --version && tsc --version && pandoc --version | head -1 && tesseract --version 2>&1 | head -1' \
	--run 'convert -version | head -1 && pdftotext -v 2>&1 | head -1 && weasyprint --version' \
	--run 'rm -rf .toolbox .cache .config .npm'
