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
# Packages Debian does not carry (bun, uv, Biome) are left out: Berth
# installs nothing from outside Debian, npm and the Go proxy, and template
# builds have no network.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
berth=${BERTH:-$here/../../bin/berth}
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
"$berth" template build toolbox \
	-e MPLBACKEND=Agg -e PYTHONDONTWRITEBYTECODE=1 \
	--copy "$here/check.py:.toolbox/check.py" \
	--run 'python3 .toolbox/check.py' \
	--run 'node --version && tsc --version && pandoc --version | head -1 && tesseract --version 2>&1 | head -1' \
	--run 'convert -version | head -1 && pdftotext -v 2>&1 | head -1 && weasyprint --version' \
	--run 'rm -rf .toolbox .cache .config'
