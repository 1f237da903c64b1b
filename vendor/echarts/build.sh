#!/bin/sh
# Build ragsweep/ui/static/echarts.min.js: Apache ECharts with only what the run page's
# charts (ragsweep/ui/static/charts.js) use, from the npm packages pinned in
# package-lock.json, bundled by esbuild into one IIFE that defines the global `echarts`.
# The same lock file gives the same bytes (VENDORED.md records their sha256). Needs node
# and npm; writes nothing outside this folder but the files it vendors.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
static="$here/../../ragsweep/ui/static"
cd "$here"
npm ci --no-audit --no-fund
./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --global-name=echarts \
    --target=es2017 '--define:process.env.NODE_ENV="production"' \
    --outfile="$static/echarts.min.js"
cp node_modules/echarts/LICENSE "$static/echarts.LICENSE.txt"
cp node_modules/echarts/NOTICE "$static/echarts.NOTICE.txt"
cp node_modules/echarts/licenses/LICENSE-d3 "$static/d3.LICENSE.txt"
cp node_modules/zrender/LICENSE "$static/zrender.LICENSE.txt"
cp node_modules/tslib/LICENSE.txt "$static/tslib.LICENSE.txt"
sha256sum "$static/echarts.min.js"
